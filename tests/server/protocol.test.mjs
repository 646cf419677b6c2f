// Raw HTTP against a live beamserve: every error case (malformed JSON, wrong types, prompt too
// long, bad sampling values, n too large, unknown model/route/method) with the right status and
// body shape, the API key, the body size limit, /health, /metrics, the native endpoints, client
// disconnects cancelling work, and garbage input that must not crash the server.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startServer, metrics, requestCount, Tok } from './lib/harness.mjs';

let server;
const MODEL = 'tiny-chat';

before(async () => { server = await startServer(['--max-body-mb', '1']); });
after(async () => { assert.equal(await server.stop(), 0); });

async function post(path, body, headers = {}) {
  const r = await fetch(server.baseUrl + path, {
    method: 'POST', headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, json, text, headers: r.headers };
}

const chat = (extra) => ({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, ...extra });

function assertOpenAiError(r, status, param) {
  assert.equal(r.status, status, r.text);
  assert.equal(typeof r.json.error.message, 'string');
  assert.equal(typeof r.json.error.type, 'string');
  if (param !== undefined) assert.equal(r.json.error.param, param, r.text);
}

function assertAnthropicError(r, status, type) {
  assert.equal(r.status, status, r.text);
  assert.equal(r.json.type, 'error');
  assert.equal(r.json.error.type, type);
  assert.equal(typeof r.json.error.message, 'string');
}

// Sends raw bytes, returns the whole response text (the server closes or we time out).
function raw(bytes, { timeoutMs = 5000 } = {}) {
  return new Promise((resolve) => {
    const s = net.connect(server.port, '127.0.0.1');
    let data = '';
    s.on('data', (d) => { data += d.toString('latin1'); });
    s.on('error', () => resolve(data));
    s.on('close', () => resolve(data));
    s.write(bytes);
    setTimeout(() => { s.destroy(); resolve(data); }, timeoutMs);
  });
}

test('malformed JSON is a 400 in each API shape', async () => {
  assertOpenAiError(await post('/v1/chat/completions', '{"model": '), 400);
  assertOpenAiError(await post('/v1/completions', 'not json'), 400);
  assertOpenAiError(await post('/v1/responses', '[1, 2'), 400);
  assertAnthropicError(await post('/v1/messages', '{{'), 400, 'invalid_request_error');
  assertOpenAiError(await post('/v1/chat/completions', ''), 400);
  assertOpenAiError(await post('/v1/chat/completions', '[]'), 400);
  // Invalid UTF-8 inside a JSON string.
  const r = await fetch(server.baseUrl + '/v1/chat/completions', { method: 'POST',
    body: Buffer.concat([Buffer.from('{"messages": [{"role": "user", "content": "'), Buffer.from([0xff, 0xfe]),
      Buffer.from('"}]}')]) });
  assert.equal(r.status, 400);
});

test('wrong types name the field', async () => {
  assertOpenAiError(await post('/v1/chat/completions', chat({ temperature: 'hot' })), 400, 'temperature');
  assertOpenAiError(await post('/v1/chat/completions', chat({ max_tokens: 'ten' })), 400, 'max_tokens');
  assertOpenAiError(await post('/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: 3 }] }),
    400, 'messages[0].content');
  assertOpenAiError(await post('/v1/chat/completions', chat({ stream: 1 })), 400, 'stream');
  assertOpenAiError(await post('/v1/chat/completions', chat({ tools: {} })), 400, 'tools');
  assertOpenAiError(await post('/v1/completions', { model: MODEL, prompt: { a: 1 } }), 400, 'prompt');
  assertOpenAiError(await post('/v1/responses', { model: MODEL, input: 5 }), 400, 'input');
  assertAnthropicError(await post('/v1/messages', { model: MODEL, max_tokens: 'x', messages: [] }), 400,
    'invalid_request_error');
  assertOpenAiError(await post('/generate', { input_ids: ['a'] }), 400);
});

test('bad sampling values and n too large', async () => {
  assertOpenAiError(await post('/v1/chat/completions', chat({ temperature: -1 })), 400, 'temperature');
  assertOpenAiError(await post('/v1/chat/completions', chat({ top_p: 0 })), 400, 'top_p');
  assertOpenAiError(await post('/v1/chat/completions', chat({ top_k: -5 })), 400, 'top_k');
  assertOpenAiError(await post('/v1/chat/completions', chat({ presence_penalty: 3 })), 400, 'presence_penalty');
  assertOpenAiError(await post('/v1/chat/completions', chat({ logit_bias: { 9999: 1 } })), 400, 'logit_bias');
  assertOpenAiError(await post('/v1/chat/completions', chat({ top_logprobs: 3 })), 400, 'top_logprobs');
  assertOpenAiError(await post('/v1/chat/completions', chat({ max_tokens: 0 })), 400, 'max_tokens');
  assertOpenAiError(await post('/v1/chat/completions', chat({ seed: -1 })), 400, 'seed');
  assertOpenAiError(await post('/v1/chat/completions', chat({ stop: [''] })), 400, 'stop');
  assertOpenAiError(await post('/v1/chat/completions', chat({ n: 129 })), 400, 'n');
  assertOpenAiError(await post('/v1/completions', { model: MODEL, prompt: 'x', n: 1000 }), 400, 'n');
});

test('prompt longer than the context', async () => {
  const long = 'z9'.repeat(5000);  // > 4096 tokens (--max-model-len 4096)
  const r = await post('/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: long }] });
  assertOpenAiError(r, 400);
  assert.equal(r.json.error.code, 'context_length_exceeded');
  const r2 = await post('/v1/chat/completions', chat({ max_tokens: 5000 }));
  assertOpenAiError(r2, 400, 'max_tokens');
  assert.equal(r2.json.error.code, 'context_length_exceeded');
  const r3 = await post('/v1/messages', { model: MODEL, max_tokens: 10, messages: [{ role: 'user', content: long }] });
  assertAnthropicError(r3, 400, 'invalid_request_error');
});

test('unknown model, route and method', async () => {
  const r = await post('/v1/chat/completions', chat({ model: 'gpt-4o' }));
  assertOpenAiError(r, 404, 'model');
  assert.equal(r.json.error.code, 'model_not_found');
  assertAnthropicError(await post('/v1/messages', { model: 'claude-x', max_tokens: 5,
    messages: [{ role: 'user', content: 'x' }] }), 404, 'not_found_error');
  assertOpenAiError(await post('/v1/nothing', {}), 404);
  const get = await fetch(server.baseUrl + '/v1/chat/completions');
  assert.equal(get.status, 405);
  const m = await fetch(server.baseUrl + '/v1/models/other');
  assert.equal(m.status, 404);
});

test('body size limit answers 413 in the endpoint\'s shape', async () => {
  const big = 'x'.repeat(2 * 1024 * 1024);
  for (const [path, anthropic] of [['/v1/chat/completions', false], ['/v1/messages', true]]) {
    const head = `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${big.length}\r\n\r\n`;
    const resp = await raw(head + big.slice(0, 1000));
    assert.match(resp, /^HTTP\/1\.1 413 /);
    const body = JSON.parse(resp.slice(resp.indexOf('\r\n\r\n') + 4));
    if (anthropic) assert.equal(body.error.type, 'request_too_large');
    else assert.match(body.error.message, /exceeds the limit/);
  }
});

test('Expect: 100-continue gets a 100 before the body is sent', async () => {
  const body = JSON.stringify({ prompt: 'Hello' });
  const s = net.connect(server.port, '127.0.0.1');
  await new Promise((r) => s.on('connect', r));
  let data = '';
  s.on('data', (d) => { data += d; });
  s.write(`POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: ${body.length}\r\n\r\n`);
  for (let i = 0; i < 200 && !data.includes('\r\n\r\n'); i++) await new Promise((r) => setTimeout(r, 5));
  assert.match(data, /^HTTP\/1\.1 100 Continue\r\n\r\n$/);
  s.write(body);
  for (let i = 0; i < 200 && !data.includes('"tokens"'); i++) await new Promise((r) => setTimeout(r, 5));
  s.destroy();
  assert.match(data, /HTTP\/1\.1 200 OK/);
});

test('garbage never crashes the server', async () => {
  const bodies = ['null', '1e999999', '"x"', '{"messages": null}', '{"messages": [null]}', '{"messages": [[]]}',
    '{"messages": [{"role": null}]}', '{"messages": [{"role": "user", "content": [1]}]}',
    '{"messages": [{"role": "user", "content": [{"type": "text"}]}]}', '{"n": 1e308, "messages": []}',
    '{"max_tokens": -99999999999999999999999, "messages": [{"role": "user", "content": "x"}]}',
    '['.repeat(100000) + ']'.repeat(100000), '{"a":'.repeat(50000)];
  for (const path of ['/v1/chat/completions', '/v1/completions', '/v1/responses', '/v1/messages',
    '/v1/messages/count_tokens', '/tokenize', '/detokenize', '/generate']) {
    for (const b of bodies) {
      // Whatever the verdict (a 400, or a 200 where the body happens to be acceptable), never a 5xx.
      const r = await post(path, b);
      assert.ok(r.status < 500 && r.json !== null, `${path} ${b.slice(0, 40)} → ${r.status} ${r.text.slice(0, 200)}`);
    }
  }
  assert.match(await raw('\x01\x02 not http\r\n\r\n'), /^HTTP\/1\.1 400 /);
  assert.match(await raw('BREW / HTTP/1.1\r\nHost: x\r\n\r\n', { timeoutMs: 300 }), /^HTTP\/1\.1 404 /);
  await raw('POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 10\r\n\r\n{"a"', { timeoutMs: 200 });
  assert.equal((await fetch(server.baseUrl + '/health')).status, 200);
});

test('tokenize, detokenize and /generate', async () => {
  const t = await post('/tokenize', { model: MODEL, prompt: 'Hello world' });
  assert.equal(t.status, 200);
  assert.equal(t.json.count, t.json.tokens.length);
  assert.equal(t.json.max_model_len, 4096);
  const d = await post('/detokenize', { model: MODEL, tokens: t.json.tokens });
  assert.equal(d.json.prompt, 'Hello world');
  const chatTok = await post('/tokenize', { model: MODEL, messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(chatTok.json.tokens[0], Tok.IM_START);
  const cr = await post('/v1/chat/completions', chat({ max_tokens: 1 }));
  assert.equal(cr.json.usage.prompt_tokens, chatTok.json.count);

  const g = await post('/generate', { input_ids: [Tok.HELLO, 40, 41, 42], max_tokens: 5, temperature: 0,
    ignore_eos: true, logprobs: true, top_logprobs: 2 });
  assert.equal(g.status, 200, g.text);
  const c = g.json.choices[0];
  assert.equal(c.token_ids.length, 5);
  assert.equal(c.logprobs.length, 5);
  for (let i = 0; i < 5; i++) {
    assert.equal(c.logprobs[i].token_id, c.token_ids[i]);
    assert.equal(c.logprobs[i].top_logprobs.length, 2);
    assert.equal(c.logprobs[i].rank, 1);  // greedy: the chosen token is the most likely
    assert.equal(c.logprobs[i].top_logprobs[0].token_id, c.token_ids[i]);
  }
  assert.equal(c.finish_reason, 'length');
  assert.deepEqual(g.json.usage, { prompt_tokens: 4, cached_tokens: g.json.usage.cached_tokens, completion_tokens: 5 });
  const text = await post('/detokenize', { tokens: c.token_ids });
  assert.equal(c.text, text.json.prompt);
  // Streaming returns the same ids.
  const r = await fetch(server.baseUrl + '/generate', { method: 'POST', body: JSON.stringify({
    input_ids: [Tok.HELLO, 40, 41, 42], max_tokens: 5, temperature: 0, ignore_eos: true, stream: true }) });
  const sse = await r.text();
  const ids = [];
  for (const line of sse.split('\n')) {
    if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
    const ev = JSON.parse(line.slice(6));
    if (ev.token_ids) ids.push(...ev.token_ids);
  }
  assert.deepEqual(ids, c.token_ids);
  assert.ok(sse.endsWith('data: [DONE]\n\n'));
  // Stop ids end generation with the id reported.
  const s = await post('/generate', { input_ids: [Tok.HELLO, 40, 41, 42], max_tokens: 50, temperature: 0, ignore_eos: true,
    stop_token_ids: [c.token_ids[2]] });
  assert.equal(s.json.choices[0].finish_reason, 'stop');
  assert.equal(s.json.choices[0].stop_token, c.token_ids[2]);
  assert.deepEqual(s.json.choices[0].token_ids, c.token_ids.slice(0, 3));
});

async function waitForIdle(timeoutMs = 10000) {
  const t0 = Date.now();
  for (;;) {
    const m = await metrics(server.baseUrl);
    if (m.beamserve_requests_running === 0 && m.beamserve_requests_waiting === 0 && m.beamserve_active_generations === 0)
      return m;
    if (Date.now() - t0 > timeoutMs) assert.fail(`engine still busy: ${JSON.stringify(m)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('a client disconnect cancels the engine request (streaming and not)', async () => {
  const before = await metrics(server.baseUrl);
  for (const stream of [true, false]) {
    const body = JSON.stringify(chat({ max_tokens: 3000, ignore_eos: true, stream }));
    const s = net.connect(server.port, '127.0.0.1');
    await new Promise((r) => s.on('connect', r));
    s.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    if (stream) await new Promise((r) => s.once('data', r));  // the stream has started
    else {
      // Wait until the engine is running it.
      for (;;) {
        const m = await metrics(server.baseUrl);
        if (m.beamserve_requests_running > 0) break;
        await new Promise((r) => setTimeout(r, 5));
      }
    }
    s.destroy();
    const m = await waitForIdle(5000);
    // Far fewer than 3000 tokens were generated: the request stopped when the client left.
    assert.ok(m.beamserve_generated_tokens_total - before.beamserve_generated_tokens_total < 2500);
  }
  const m = await metrics(server.baseUrl);
  assert.equal(requestCount(m, (e, s) => e === '/v1/chat/completions' && s === 499) -
    requestCount(before, (e, s) => e === '/v1/chat/completions' && s === 499), 2);
});

test('/health and /metrics', async () => {
  const h = await fetch(server.baseUrl + '/health');
  assert.equal(h.status, 200);
  assert.deepEqual(await h.json(), { status: 'ok' });
  const before = await metrics(server.baseUrl);
  for (let i = 0; i < 3; i++) assert.equal((await post('/v1/completions', { model: MODEL, prompt: 'abc', max_tokens: 2 })).status, 200);
  assert.equal((await post('/v1/completions', { model: MODEL, prompt: 'abc', top_p: 9 })).status, 400);
  const r = await fetch(server.baseUrl + '/metrics');
  assert.match(r.headers.get('content-type'), /^text\/plain/);
  const m = await waitForIdle();
  const count = (status) => requestCount(m, (e, s) => e === '/v1/completions' && s === status) -
    requestCount(before, (e, s) => e === '/v1/completions' && s === status);
  assert.equal(count(200), 3);
  assert.equal(count(400), 1);
  assert.ok(m.beamserve_prompt_tokens_total >= before.beamserve_prompt_tokens_total + 3);
  assert.ok(m.beamserve_generated_tokens_total >= before.beamserve_generated_tokens_total + 6);
  assert.ok(m.beamserve_cached_prompt_tokens_total <= m.beamserve_prompt_tokens_total);
  assert.ok(m['beamserve_time_to_first_token_seconds_count'] >= 3);
  assert.ok(m['beamserve_end_to_end_latency_seconds_count'] >= 3);
  for (const pool of ['full', 'sliding']) {
    const total = m[`beamserve_kv_blocks{pool="${pool}",state="total"}`];
    assert.ok(total > 0);
    assert.equal(m[`beamserve_kv_blocks{pool="${pool}",state="used"}`], 0);
    assert.equal(m[`beamserve_kv_blocks{pool="${pool}",state="free"}`] +
      m[`beamserve_kv_blocks{pool="${pool}",state="cached"}`], total);
  }
  assert.equal(m.beamserve_ready, 1);
});

test('API key on every endpoint but /health', async () => {
  const keyed = await startServer(['--api-key', 'sekret']);
  try {
    const url = (p) => keyed.baseUrl + p;
    assert.equal((await fetch(url('/health'))).status, 200);
    for (const [path, method] of [['/v1/models', 'GET'], ['/metrics', 'GET'], ['/v1/chat/completions', 'POST'],
      ['/v1/messages', 'POST'], ['/tokenize', 'POST'], ['/generate', 'POST']]) {
      const r = await fetch(url(path), { method, body: method === 'POST' ? '{}' : undefined });
      assert.equal(r.status, 401, path);
      const body = await r.json();
      if (path === '/v1/messages') assert.equal(body.error.type, 'authentication_error');
      else assert.equal(body.error.code, 'invalid_api_key');
    }
    assert.equal((await fetch(url('/v1/models'), { headers: { authorization: 'Bearer wrong' } })).status, 401);
    assert.equal((await fetch(url('/v1/models'), { headers: { authorization: 'Bearer sekret' } })).status, 200);
    assert.equal((await fetch(url('/v1/models'), { headers: { 'x-api-key': 'sekret' } })).status, 200);
    assert.equal((await fetch(url('/metrics'), { headers: { 'x-api-key': 'sekret' } })).status, 200);
  } finally {
    assert.equal(await keyed.stop(), 0);
  }
});

// Routing replay (SGLang's fields): every position the model read, [positions, 5 sparse layers,
// top-4] little-endian int32 ids in base64, on /generate, completions and chat (also streamed).
test('return_routed_experts: each position the model read, from routed_experts_start_len', async () => {
  const decode = (b64) => Array.from(new Int32Array(new Uint8Array(Buffer.from(b64, 'base64')).buffer));
  const perPosition = 5 * 4;  // tiny-beam: 5 MoE layers, top-4 of 16 experts
  const ask = { input_ids: [3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14], max_tokens: 5, ignore_eos: true,
    temperature: 0, return_routed_experts: true };
  assertOpenAiError(await post('/generate', ask), 400, 'return_routed_experts');  // no server flag
  const routed = await startServer(['--enable-return-routed-experts']);
  try {
    const at = async (path, body) => {
      const r = await fetch(routed.baseUrl + path, { method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body) });
      return { status: r.status, text: await r.text() };
    };
    const whole = JSON.parse((await at('/generate', ask)).text).choices[0];
    const ids = decode(whole.routed_experts);
    assert.equal(ids.length, (12 + 5 - 1) * perPosition);
    assert.ok(ids.every((e) => e >= 0 && e < 16));
    for (let p = 0; p < ids.length; p += 4) assert.equal(new Set(ids.slice(p, p + 4)).size, 4);  // distinct top-4
    const tail = JSON.parse((await at('/generate', { ...ask, routed_experts_start_len: 10 })).text).choices[0];
    assert.deepEqual(decode(tail.routed_experts), ids.slice(10 * perPosition));
    const plain = JSON.parse((await at('/generate', { ...ask, return_routed_experts: false })).text).choices[0];
    assert.equal(plain.routed_experts, undefined);
    assert.deepEqual(plain.token_ids, whole.token_ids);
    const done = JSON.parse((await at('/v1/completions', { model: MODEL, prompt: 'hello world', max_tokens: 4,
      ignore_eos: true, n: 2, temperature: 1, seed: 3, return_routed_experts: true })).text);
    const promptTokens = done.usage.prompt_tokens;
    for (const c of done.choices)
      assert.equal(decode(c.sgl_ext.routed_experts).length, (promptTokens + 4 - 1) * perPosition);
    const streamed = await at('/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 3, ignore_eos: true, stream: true, stream_options: { include_usage: true },
      return_routed_experts: true });
    const chunks = streamed.text.split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)));
    const last = chunks.find((c) => c.choices[0]?.finish_reason);
    const usage = chunks.at(-1).usage;
    assert.equal(decode(last.choices[0].sgl_ext.routed_experts).length,
      (usage.prompt_tokens + usage.completion_tokens - 1) * perPosition);
    const refused = await at('/v1/completions', { model: MODEL, prompt: 'x', max_tokens: 2, stop: ['a'],
      return_routed_experts: true });
    assert.equal(refused.status, 400);
    assert.equal(JSON.parse(refused.text).error.param, 'return_routed_experts');
  } finally {
    assert.equal(await routed.stop(), 0);
  }
});
