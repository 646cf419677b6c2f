// Raw HTTP against a live beamserve: every error case (malformed JSON, wrong types, prompt too
// long, bad sampling values, n too large, unknown model/route/method) with the right status and
// body shape, the API key, the body size limit, /health, /metrics, the native endpoints, client
// disconnects cancelling work, garbage input that must not crash the server, and prompt logprobs
// (echo as lm-evaluation-harness scores, vLLM's prompt_logprobs, /generate's, prompt lists).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startServer, metrics, requestCount, Tok, repoRoot, PREFILL_VS_DECODE, tinyBeamLora,
  tinyBeamCopy, tinyBeamWithReversedEmbedding, TINY_BEAM_EXPERT_MODULES } from './lib/harness.mjs';

let server;
const MODEL = 'tiny-chat';

before(async () => { server = await startServer(['--max-body-mb', '1', '--enable-weight-updates']); });
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
  assertOpenAiError(await post('/v1/chat/completions', chat({ guided_grammar: 3 })), 400,
    'guided_grammar');
  assertOpenAiError(await post('/v1/completions', { model: MODEL, prompt: 'x',
    ebnf: ['root ::= "a"'] }), 400, 'ebnf');
  // A grammar that does not compile names its field (and says why).
  const bad = await post('/v1/completions', { model: MODEL, prompt: 'x',
    grammar: 'root ::= "a" missing' });
  assertOpenAiError(bad, 400, 'grammar');
  assert.match(bad.json.error.message, /^'grammar' cannot be enforced: .*missing/);
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
  assert.equal(t.json.token_strs, undefined);
  // vLLM's return_token_strs: the vocabulary spellings (ByteLevel: "Ġ" is a space).
  const strs = (await post('/tokenize', { model: MODEL, prompt: 'Hello world', return_token_strs: true }))
    .json.token_strs;
  assert.equal(strs.length, t.json.tokens.length);
  assert.equal(strs.join('').replaceAll('Ġ', ' '), 'Hello world');
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
  // Each request's 499 is counted when its job ends, which may come just after the engine idles.
  const left = (m) => requestCount(m, (e, s) => e === '/v1/chat/completions' && s === 499) -
    requestCount(before, (e, s) => e === '/v1/chat/completions' && s === 499);
  const deadline = Date.now() + 5000;
  while (left(await metrics(server.baseUrl)) < 2 && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 10));
  assert.equal(left(await metrics(server.baseUrl)), 2);
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
  // A request is counted once its answer is out, so a fast client can read /metrics first: poll.
  let m = await waitForIdle();
  const count = (status) => requestCount(m, (e, s) => e === '/v1/completions' && s === status) -
    requestCount(before, (e, s) => e === '/v1/completions' && s === status);
  for (let t0 = Date.now(); (count(200) < 3 || count(400) < 1) && Date.now() - t0 < 5000;) {
    await new Promise((r) => setTimeout(r, 20));
    m = await metrics(server.baseUrl);
  }
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

// SGLang's /health_generate: one token generated ahead of the queue proves the engine works.
test('/health_generate generates a token', async () => {
  const r = await fetch(server.baseUrl + '/health_generate');
  assert.equal(r.status, 200);
  assert.deepEqual(await r.json(), { status: 'ok' });
  assert.equal((await fetch(server.baseUrl + '/v1/models/tiny-chat')).status, 200);  // still routed
});

// SGLang's /get_server_info: the serving settings under SGLang's names, and the engine's state.
test('/get_server_info reports the settings and the engine state', async () => {
  const ask = { model: MODEL, prompt: 'The weather', max_tokens: 16, temperature: 0, ignore_eos: true };
  assert.equal((await post('/v1/completions', ask)).status, 200);
  await waitForIdle();  // the engine publishes its numbers after the step that answered
  const r = await fetch(server.baseUrl + '/get_server_info');
  assert.equal(r.status, 200);
  const info = await r.json();
  assert.equal(info.model_path, path.join(repoRoot, 'models/tiny-beam'));
  assert.equal(info.load_format, 'auto');
  assert.equal(info.tokenizer_path, path.join(repoRoot, 'tests/server/fixtures/tiny-chat'));
  assert.equal(info.served_model_name, MODEL);
  assert.equal(info.port, Number(new URL(server.baseUrl).port));
  assert.equal(info.device, process.env.BEAMSERVE_DEVICE ?? 'cpu');
  // Batch invariant on the CPU always; on the GPU only with --enable-deterministic-inference.
  assert.equal(info.enable_deterministic_inference, info.device === 'cpu');
  assert.equal(info.context_length, 4096);
  assert.equal(info.page_size, 16);
  assert.equal(info.max_running_requests, 256);
  assert.ok([2048, 8192].includes(info.chunked_prefill_size), String(info.chunked_prefill_size));
  assert.ok(info.max_total_num_tokens > 0 && info.max_total_num_tokens % 16 === 0);
  assert.equal(info.disable_radix_cache, false);
  assert.equal(info.enable_weight_updates, true);
  assert.equal(info.enable_memory_saver, false);
  assert.equal(info.api_key_required, false);
  assert.ok(!('api_key' in info));
  assert.match(info.version, /^\d+\.\d+\.\d+$/);
  const [state] = info.internal_states;
  assert.ok(state.last_gen_throughput > 0, JSON.stringify(state));  // 16 tokens just now
  assert.ok((await metrics(server.baseUrl)).beamserve_generation_tokens_per_second > 0);
  assert.equal(state.num_running_reqs, 0);
  assert.equal(state.num_waiting_reqs, 0);
  assert.ok(state.token_usage >= 0 && state.token_usage < 1);
  // get_model_info's preferred_sampling_params: generation_config.json's defaults.
  const model = await (await fetch(server.baseUrl + '/get_model_info')).json();
  assert.equal(model.preferred_sampling_params.temperature, 0.7);
  assert.equal(model.preferred_sampling_params.top_p, 0.99);
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
    // SGLang's format (slime reads meta_info.routed_experts): the same ids.
    const sgl = JSON.parse((await at('/generate', { input_ids: ask.input_ids, return_routed_experts: true,
      routed_experts_start_len: 10, sampling_params: { max_new_tokens: 5, ignore_eos: true, temperature: 0 } })).text);
    assert.deepEqual(decode(sgl.meta_info.routed_experts), ids.slice(10 * perPosition));
    assert.deepEqual(sgl.output_ids, whole.token_ids);
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
    // A stop string: the output ends at it and its routing is that of the kept tokens (the
    // greedy run's prefix), though the engine was asked to stop only after reading further.
    const greedy = { model: MODEL, prompt: 'hello world', max_tokens: 12, ignore_eos: true,
      temperature: 0, return_routed_experts: true };
    const full = JSON.parse((await at('/v1/completions', greedy)).text);
    const chars = Array.from(full.choices[0].text);
    const stop = chars.slice(chars.length >> 1, (chars.length >> 1) + 2).join('');
    assert.ok(stop.length > 0, full.choices[0].text);
    const cut = JSON.parse((await at('/v1/completions', { ...greedy, stop: [stop] })).text);
    assert.equal(cut.choices[0].finish_reason, 'stop');
    assert.ok(cut.usage.completion_tokens < 12, JSON.stringify(cut.usage));
    assert.deepEqual(decode(cut.choices[0].sgl_ext.routed_experts),
      decode(full.choices[0].sgl_ext.routed_experts)
        .slice(0, (cut.usage.prompt_tokens + cut.usage.completion_tokens - 1) * perPosition));
  } finally {
    assert.equal(await routed.stop(), 0);
  }
});

// SGLang's return_hidden_states: the final norm's output at every position the model read, as
// little-endian bf16 rows in base64 on beamserve's /generate, SGLang's lists in meta_info, and the
// last row on completions and chat (also streamed); computed whole even when the prompt is cached.
test('return_hidden_states: each position the model read, in every endpoint format', async () => {
  const rows = (b64) => {
    const bits = new Uint16Array(new Uint8Array(Buffer.from(b64, 'base64')).buffer);
    const view = new DataView(new ArrayBuffer(4));
    return Array.from(bits, (b) => { view.setUint32(0, b << 16); return view.getFloat32(0); });
  };
  const ask = { input_ids: [3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14], max_tokens: 5, ignore_eos: true,
    temperature: 0, return_hidden_states: true };
  assertOpenAiError(await post('/generate', ask), 400, 'return_hidden_states');  // no server flag
  const server = await startServer(['--enable-return-hidden-states']);
  try {
    const at = async (path, body) => {
      const r = await fetch(server.baseUrl + path, { method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body) });
      assert.equal(r.status, 200, path);
      return r.text();
    };
    const info = await (await fetch(server.baseUrl + '/get_server_info')).json();
    assert.equal(info.enable_return_hidden_states, true);
    const whole = JSON.parse(await at('/generate', ask)).choices[0];
    const values = rows(whole.hidden_states);
    const positions = 12 + 5 - 1;
    assert.equal(values.length % positions, 0);
    const H = values.length / positions;
    assert.ok(H > 0 && values.every(Number.isFinite));
    const row = (p) => values.slice(p * H, (p + 1) * H);
    // SGLang's lists: the prompt's 12 rows, then one row per later position; the prompt is cached
    // now, but computed again (cached_tokens 0), to the same values.
    const sgl = JSON.parse(await at('/generate', { input_ids: ask.input_ids, return_hidden_states: true,
      sampling_params: { max_new_tokens: 5, ignore_eos: true, temperature: 0 } }));
    assert.equal(sgl.meta_info.cached_tokens, 0);
    assert.deepEqual(sgl.output_ids, whole.token_ids);
    const lists = sgl.meta_info.hidden_states;
    assert.equal(lists.length, 5);
    assert.deepEqual(lists[0], Array.from({ length: 12 }, (_, p) => row(p)));
    for (let i = 1; i < 5; ++i) assert.deepEqual(lists[i], row(11 + i));
    const plain = JSON.parse(await at('/generate', { ...ask, return_hidden_states: false })).choices[0];
    assert.equal(plain.hidden_states, undefined);
    assert.deepEqual(plain.token_ids, whole.token_ids);
    // Completions (n = 2) and streamed chat: each choice's last row.
    const done = JSON.parse(await at('/v1/completions', { model: MODEL, prompt: 'hello world', max_tokens: 4,
      ignore_eos: true, n: 2, temperature: 1, seed: 3, return_hidden_states: true }));
    for (const c of done.choices) assert.equal(c.hidden_states.length, H);
    const streamed = await at('/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 3, ignore_eos: true, stream: true, return_hidden_states: true });
    const chunks = streamed.split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)));
    const last = chunks.find((c) => c.choices[0]?.finish_reason);
    assert.equal(last.choices[0].hidden_states.length, H);
    // A stop string: the states are those of the kept tokens (a prefix of the greedy run's).
    const greedy = { text: 'hello world', return_hidden_states: true,
      sampling_params: { max_new_tokens: 12, ignore_eos: true, temperature: 0 } };
    const full = JSON.parse(await at('/generate', greedy));
    const chars = Array.from(full.text);
    const stop = chars.slice(chars.length >> 1, (chars.length >> 1) + 2).join('');
    assert.ok(stop.length > 0, full.text);
    const cut = JSON.parse(await at('/generate', { ...greedy,
      sampling_params: { ...greedy.sampling_params, stop: [stop] } }));
    assert.equal(cut.meta_info.finish_reason.type, 'stop');
    const kept = cut.meta_info.completion_tokens;
    assert.ok(kept < 12, JSON.stringify(cut.meta_info));
    assert.deepEqual(cut.meta_info.hidden_states, full.meta_info.hidden_states.slice(0, kept));
    // /v1/embeddings is the last prompt row: as is without normalize, L2-normalized by default.
    const embedded = JSON.parse(await at('/v1/embeddings', { model: MODEL, input: ask.input_ids,
      normalize: false }));
    assert.deepEqual(embedded.data[0].embedding, row(11));
    const norm = Math.hypot(...row(11));
    const unit = JSON.parse(await at('/v1/embeddings', { model: MODEL, input: ask.input_ids }));
    unit.data[0].embedding.forEach((v, i) => assert.ok(Math.abs(v - row(11)[i] / norm) < 1e-6));
    // vLLM's /pooling: every prompt row (task token_embed, the default), each normalized unless
    // normalize is false; task embed is the embedding; base64 packs the rows one after another.
    const pooled = JSON.parse(await at('/pooling', { model: MODEL, input: ask.input_ids,
      normalize: false }));
    assert.equal(pooled.object, 'list');
    assert.ok(pooled.id.startsWith('pool-'), pooled.id);
    assert.equal(pooled.data[0].object, 'pooling');
    assert.deepEqual(pooled.data[0].data, Array.from({ length: 12 }, (_, p) => row(p)));
    assert.equal(pooled.usage.prompt_tokens, 12);
    const unitRows = JSON.parse(await at('/pooling', { model: MODEL, input: ask.input_ids })).data[0].data;
    unitRows.forEach((r, p) => r.forEach((v, i) => assert.ok(
      Math.abs(v - row(p)[i] / Math.hypot(...row(p))) < 1e-6)));
    const packed = JSON.parse(await at('/pooling', { model: MODEL, input: ask.input_ids,
      normalize: false, encoding_format: 'base64' })).data[0].data;
    const packedFloats = new Float32Array(new Uint8Array(Buffer.from(packed, 'base64')).buffer);
    assert.deepEqual(Array.from(packedFloats), pooled.data[0].data.flat().map(Math.fround));
    const embedTask = JSON.parse(await at('/pooling', { model: MODEL, input: ask.input_ids,
      task: 'embed' })).data[0].data;
    assert.deepEqual(embedTask, unit.data[0].embedding);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

// OpenAI's /v1/embeddings (as vLLM serves decoder models): the last token's final hidden state,
// L2-normalized; text or token ids, batches, base64 float32, no server flag.
test('embeddings: each input\'s last final hidden state, normalized', async () => {
  const r = await post('/v1/embeddings', { model: MODEL, input: ['hello world', [3, 4, 5]] });
  assert.equal(r.status, 200, r.text);
  const body = r.json;
  assert.equal(body.object, 'list');
  assert.equal(body.model, MODEL);
  assert.equal(body.data.length, 2);
  body.data.forEach((d, i) => {
    assert.equal(d.index, i);
    assert.equal(d.object, 'embedding');
    assert.ok(Math.abs(Math.hypot(...d.embedding) - 1) < 1e-5);
  });
  assert.equal(body.data[0].embedding.length, body.data[1].embedding.length);
  assert.ok(body.usage.prompt_tokens > 3);
  assert.equal(body.usage.total_tokens, body.usage.prompt_tokens);
  // The same input again (its prefix cached up to the last token): the same vector, as base64.
  const b64 = (await post('/v1/embeddings', { model: MODEL, input: [3, 4, 5],
    encoding_format: 'base64' })).json;
  const floats = new Float32Array(new Uint8Array(Buffer.from(b64.data[0].embedding, 'base64')).buffer);
  assert.deepEqual(Array.from(floats), body.data[1].embedding.map(Math.fround));
  const H = floats.length;
  assertOpenAiError(await post('/v1/embeddings', { model: MODEL, input: 'x', dimensions: H + 1 }),
    400, 'dimensions');
  assertOpenAiError(await post('/v1/embeddings', { model: MODEL, input: 'x', encoding_format: 'hex' }),
    400, 'encoding_format');
  assertOpenAiError(await post('/v1/embeddings', { model: MODEL, input: [[1], [999999]] }), 400,
    'input[1]');
  assertOpenAiError(await post('/v1/embeddings', { model: MODEL }), 400, 'input');
  // vLLM's chat form: the conversation rendered by the chat template (no generation prompt by
  // default) embeds as its token ids do.
  const messages = [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'hello' }];
  const ids = (await post('/tokenize', { model: MODEL, messages, add_generation_prompt: false })).json.tokens;
  const chatForm = (await post('/v1/embeddings', { model: MODEL, messages })).json;
  const idsForm = (await post('/v1/embeddings', { model: MODEL, input: ids })).json;
  assert.deepEqual(chatForm.data[0].embedding, idsForm.data[0].embedding);
  assert.equal(chatForm.usage.prompt_tokens, ids.length);
  assertOpenAiError(await post('/v1/embeddings', { model: MODEL, messages, input: 'x' }), 400,
    'messages');
});

// vLLM's /score and /rerank for a model without a classification head: a pair's score is the
// cosine similarity of the texts' embeddings; one text_1 against each text_2 or pairwise lists;
// rerank best first with top_n and return_documents.
test('score and rerank: cosine similarities of the texts\' embeddings', async () => {
  const texts = ['hello world', 'the cat sat', 'hello there world', [3, 4, 5]];
  const emb = (await post('/v1/embeddings', { model: MODEL, input: texts })).json.data.map((d) => d.embedding);
  const cos = (a, b) => a.reduce((s, v, i) => s + v * b[i], 0);  // unit vectors
  const near = (got, want) => assert.ok(Math.abs(got - want) < 1e-5, `${got} vs ${want}`);
  for (const path of ['/score', '/v1/score']) {
    const r = await post(path, { model: MODEL, text_1: texts[0], text_2: texts.slice(1) });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.object, 'list');
    assert.ok(r.json.id.startsWith('score-'), r.json.id);
    assert.equal(r.json.model, MODEL);
    assert.equal(r.json.data.length, 3);
    r.json.data.forEach((d, i) => {
      assert.equal(d.index, i);
      assert.equal(d.object, 'score');
      near(d.score, cos(emb[0], emb[i + 1]));
    });
  }
  const pairwise = (await post('/score', { model: MODEL, text_1: [texts[1], texts[2]],
    text_2: [texts[3], texts[2]] })).json;
  near(pairwise.data[0].score, cos(emb[1], emb[3]));
  near(pairwise.data[1].score, 1);  // a text against itself
  // usage counts every text, a repeated one each time.
  const one = (await post('/score', { model: MODEL, text_1: texts[1], text_2: texts[1] })).json;
  const alone = (await post('/v1/embeddings', { model: MODEL, input: texts[1] })).json;
  assert.equal(one.usage.prompt_tokens, 2 * alone.usage.prompt_tokens);
  assertOpenAiError(await post('/score', { model: MODEL, text_1: ['a', 'b'], text_2: ['c'] }), 400,
    'text_2');
  assertOpenAiError(await post('/score', { model: MODEL, text_1: 'a', text_2: ['b', [999999]] }),
    400, 'text_2[1]');
  const documents = texts.slice(1, 3).concat(['a fourth document']);
  for (const path of ['/rerank', '/v1/rerank', '/v2/rerank']) {
    const r = await post(path, { model: MODEL, query: texts[0], documents });
    assert.equal(r.status, 200, r.text);
    assert.ok(r.json.id.startsWith('rerank-'), r.json.id);
    const results = r.json.results;
    assert.deepEqual(results.map((x) => x.index).sort(), [0, 1, 2]);
    for (let i = 1; i < results.length; ++i)
      assert.ok(results[i - 1].relevance_score >= results[i].relevance_score);
    results.forEach((x) => assert.equal(x.document.text, documents[x.index]));
    const s0 = results.find((x) => x.index === 0).relevance_score;
    near(s0, cos(emb[0], emb[1]));
    assert.ok(r.json.usage.total_tokens > 0);
  }
  const top = (await post('/v1/rerank', { model: MODEL, query: texts[0],
    documents: documents.map((text) => ({ text })), top_n: 1, return_documents: false })).json;
  const best = (await post('/v1/rerank', { model: MODEL, query: texts[0], documents })).json.results[0];
  assert.equal(top.results.length, 1);
  assert.equal(top.results[0].index, best.index);
  assert.equal(top.results[0].document, undefined);
  assertOpenAiError(await post('/rerank', { model: MODEL, query: 'q', documents: [] }), 400,
    'documents');
  assertOpenAiError(await post('/rerank', { model: MODEL, query: 'q', documents: ['a', 7] }), 400,
    'documents[1]');
  assertOpenAiError(await post('/rerank', { model: 'no-such-model', query: 'q', documents: ['a'] }),
    404);
});

// Prompt logprobs (scoring). tiny-beam has random weights, so the values are arbitrary; what is
// checked is that every path gives the same numbers the engine gave for generated tokens (to
// PREFILL_VS_DECODE where one is a prompt's and the other an output's).
const near = (a, b, tol = 1e-4) => Math.abs(a - b) <= tol;
const sseEvents = async (path, body) => {
  const r = await fetch(server.baseUrl + path, { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body) });
  assert.equal(r.status, 200);
  const text = await r.text();
  assert.ok(text.endsWith('data: [DONE]\n\n'), text);
  return text.split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)));
};
const CTX = [Tok.HELLO, 40, 41, 42, 43];
// Keeps sampled tokens ASCII (bytes >= 0x80 are ids 131..258) so token strings are whole text;
// logprobs are computed before logit_bias, so it does not change them.
const asciiOnly = Object.fromEntries(Array.from({ length: 128 }, (_, i) => [String(131 + i), -100]));

test('echo scores a continuation as lm-evaluation-harness does: the greedy output logprobs come back', async () => {
  // The continuation: 5 greedy tokens with their output logprobs (temperature 0 → T = 1).
  const gen = await post('/generate', { input_ids: CTX, max_tokens: 5, temperature: 0, ignore_eos: true,
    logprobs: true, top_logprobs: 1 });
  assert.equal(gen.status, 200, gen.text);
  const cont = gen.json.choices[0].token_ids;
  const contLogprobs = gen.json.choices[0].logprobs.map((e) => e.logprob);
  assert.equal(cont.length, 5);
  // A second continuation, whose first token is not the greedy one.
  const other = [gen.json.choices[0].logprobs[0].token_id === 50 ? 51 : 50, 52];
  // lm-evaluation-harness's local-completions loglikelihood payload: token-id prompts in a batch.
  const r = await post('/v1/completions', { model: MODEL, prompt: [[...CTX, ...cont], [...CTX, ...other]],
    max_tokens: 1, logprobs: 1, temperature: 0, seed: 1234, echo: true });
  assert.equal(r.status, 200, r.text);
  const choices = [...r.json.choices].sort((a, b) => a.index - b.index);
  assert.deepEqual(choices.map((c) => c.index), [0, 1]);
  const ctxlen = CTX.length;
  const score = (c) => {
    const lp = c.logprobs.token_logprobs.slice(ctxlen, -1);
    const top = c.logprobs.top_logprobs.slice(ctxlen, -1);
    const isGreedy = lp.every((t, i) => t === Math.max(...Object.values(top[i])));
    return { lp, top, isGreedy, sum: lp.reduce((a, b) => a + b, 0) };
  };
  const [g, o] = choices.map(score);
  for (const c of choices) {
    assert.equal(c.logprobs.token_logprobs[0], null);  // the first prompt token has no logprob
    assert.equal(c.logprobs.top_logprobs[0], null);
    assert.equal(c.finish_reason, 'length');
    const n = c.index === 0 ? ctxlen + cont.length + 1 : ctxlen + other.length + 1;
    assert.equal(c.logprobs.tokens.length, n);
    assert.equal(c.logprobs.token_logprobs.length, n);
    assert.equal(c.logprobs.text_offset.length, n);
    assert.ok(c.logprobs.token_logprobs.slice(1).every((v) => typeof v === 'number' && v <= 0));
    // The choice's text is the detokenized prompt, then the output; offsets walk the token text
    // (checked over the ASCII context: a token that is part of a character has no whole text).
    let offset = 0;
    for (let i = 0; i <= ctxlen; i++) {
      assert.equal(c.logprobs.text_offset[i], offset);
      offset += Buffer.byteLength(c.logprobs.tokens[i]);
    }
    for (let i = 1; i < n; i++) assert.ok(c.logprobs.text_offset[i] > c.logprobs.text_offset[i - 1]);
    assert.ok(c.text.startsWith(c.logprobs.tokens.slice(0, ctxlen).join('')));
  }
  assert.equal(g.lp.length, 5);
  g.lp.forEach((v, i) => assert.ok(near(v, contLogprobs[i], PREFILL_VS_DECODE),
    `position ${i}: echo ${v} vs generated ${contLogprobs[i]}`));
  assert.ok(near(g.sum, contLogprobs.reduce((a, b) => a + b, 0), 5 * PREFILL_VS_DECODE));
  assert.equal(g.isGreedy, true);
  // The prompt token is the most likely at each greedy position, so the top-1 dict holds it.
  g.top.forEach((t, i) => assert.equal(t[choices[0].logprobs.tokens[ctxlen + i]], g.lp[i]));
  assert.equal(o.isGreedy, false);
  // The same positions scored by /generate's prompt_logprobs give the same numbers.
  const native = await post('/generate', { input_ids: [...CTX, ...other], max_tokens: 0, prompt_logprobs: 1,
    logprob_start_len: ctxlen, temperature: 0 });
  assert.equal(native.status, 200, native.text);
  const entries = native.json.choices[0].prompt_logprobs;
  assert.deepEqual(entries.map((e) => e.token_id), other);
  entries.forEach((e, i) => assert.ok(near(e.logprob, o.lp[i])));
  assert.ok(entries[0].rank > 1);  // not the greedy token
  assert.notEqual(entries[0].top_logprobs[0].token_id, other[0]);
});

test('prompt logprobs use the request temperature, as output logprobs do', async () => {
  const gen = await post('/generate', { input_ids: CTX, max_tokens: 4, temperature: 0.7, seed: 11, ignore_eos: true,
    logprobs: true, logit_bias: asciiOnly });
  const cont = gen.json.choices[0].token_ids;
  const want = gen.json.choices[0].logprobs.map((e) => e.logprob);
  const at = async (temperature) => {
    const r = await post('/v1/completions', { model: MODEL, prompt: [...CTX, ...cont], max_tokens: 0, logprobs: 0,
      temperature, echo: true });
    assert.equal(r.status, 200, r.text);
    return r.json.choices[0].logprobs.token_logprobs.slice(CTX.length);
  };
  const same = await at(0.7);
  same.forEach((v, i) => assert.ok(near(v, want[i], PREFILL_VS_DECODE), `${v} vs ${want[i]}`));
  const t1 = await at(0);  // temperature 0 scores at T = 1
  assert.ok(t1.some((v, i) => !near(v, same[i], 1e-3)));
});

// logprobs_mode "raw" (vLLM's raw_logprobs): output and prompt logprobs of the logits as they are,
// whatever the temperature the tokens are drawn at; `serve --logprobs-mode raw` makes it the default.
test('logprobs_mode raw: logprobs at T = 1 whatever the temperature; the serve flag sets the default', async () => {
  const ask = { input_ids: CTX, max_tokens: 4, temperature: 0.7, seed: 11, ignore_eos: true, logprobs: true,
    logit_bias: asciiOnly };
  const scaled = (await post('/generate', ask)).json.choices[0];
  const raw = await post('/generate', { ...ask, logprobs_mode: 'raw' });
  assert.equal(raw.status, 200, raw.text);
  const c = raw.json.choices[0];
  assert.deepEqual(c.token_ids, scaled.token_ids);  // the draw does not change
  // Raw logprobs are those a temperature-0 echo scores (T = 1); the scaled ones differ.
  const echo = await post('/v1/completions', { model: MODEL, prompt: [...CTX, ...c.token_ids], max_tokens: 0,
    logprobs: 0, temperature: 0, echo: true });
  const t1 = echo.json.choices[0].logprobs.token_logprobs.slice(CTX.length);
  c.logprobs.forEach((e, i) => assert.ok(near(e.logprob, t1[i], PREFILL_VS_DECODE),
    `${e.logprob} vs ${t1[i]}`));
  assert.ok(scaled.logprobs.some((e, i) => !near(e.logprob, c.logprobs[i].logprob, 1e-3)));
  // Prompt logprobs too, and SGLang's sampling_params take the field.
  const echoRaw = await post('/v1/completions', { model: MODEL, prompt: [...CTX, ...c.token_ids], max_tokens: 0,
    logprobs: 0, temperature: 0.7, echo: true, logprobs_mode: 'raw_logprobs' });
  assert.equal(echoRaw.status, 200, echoRaw.text);
  echoRaw.json.choices[0].logprobs.token_logprobs.slice(CTX.length).forEach((v, i) => assert.ok(near(v, t1[i])));
  const sglang = await post('/generate', { input_ids: CTX, return_logprob: true, sampling_params: {
    max_new_tokens: 4, temperature: 0.7, sampling_seed: 11, ignore_eos: true, logprobs_mode: 'raw' } });
  assert.equal(sglang.status, 200, sglang.text);
  const sglangIds = sglang.json.meta_info.output_token_logprobs.map((e) => e[1]);
  const sglangEcho = await post('/v1/completions', { model: MODEL, prompt: [...CTX, ...sglangIds], max_tokens: 0,
    logprobs: 0, temperature: 0, echo: true });
  const sglangT1 = sglangEcho.json.choices[0].logprobs.token_logprobs.slice(CTX.length);
  sglang.json.meta_info.output_token_logprobs.forEach(([lp], i) =>
    assert.ok(near(lp, sglangT1[i], PREFILL_VS_DECODE), `${lp} vs ${sglangT1[i]}`));
  assertOpenAiError(await post('/generate', { ...ask, logprobs_mode: 'processed' }), 400, 'logprobs_mode');
  // The serve flag: requests that leave the field out get raw logprobs; "scaled" still overrides it.
  const rawServer = await startServer(['--logprobs-mode', 'raw']);
  try {
    const at = async (body) => {
      const r = await fetch(rawServer.baseUrl + '/generate', { method: 'POST',
        headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      assert.equal(r.status, 200);
      return (await r.json()).choices[0].logprobs.map((e) => e.logprob);
    };
    (await at(ask)).forEach((v, i) => assert.ok(near(v, t1[i], PREFILL_VS_DECODE), `${v} vs ${t1[i]}`));
    (await at({ ...ask, logprobs_mode: 'scaled' })).forEach((v, i) => assert.ok(near(v, scaled.logprobs[i].logprob)));
  } finally {
    assert.equal(await rawServer.stop(), 0);
  }
});

// cache_salt (vLLM; SGLang's cache_salt / extra_key on /generate): prefixes cached under a salt
// are reused only by requests with the same salt, and never by unsalted ones (nor the reverse).
test('cache_salt: cached prefixes are shared only among requests with the same salt', async () => {
  const ids = Array.from({ length: 100 }, (_, i) => 40 + ((i * 37) % 90));
  const cached = async (extra) => {
    const r = await post('/generate', { input_ids: ids, max_tokens: 1, temperature: 0, ...extra });
    assert.equal(r.status, 200, r.text);
    return r.json.usage.cached_tokens;
  };
  assert.equal(await cached({ cache_salt: 'alice' }), 0);
  assert.equal(await cached({ cache_salt: 'alice' }), 96);  // 16-token blocks, the last recomputed
  assert.equal(await cached({ cache_salt: 'bob' }), 0);
  assert.equal(await cached({}), 0);
  assert.equal(await cached({}), 96);
  assert.equal(await cached({ cache_salt: 'bob' }), 96);
  // SGLang's fields: cache_salt alone is the same namespace; with extra_key another one.
  const sgl = async (extra) => {
    const r = await post('/generate', { input_ids: ids, sampling_params: { max_new_tokens: 1 }, ...extra });
    assert.equal(r.status, 200, r.text);
    return r.json.meta_info.cached_tokens;
  };
  assert.equal(await sgl({ cache_salt: 'alice' }), 96);
  assert.equal(await sgl({ extra_key: 'k', cache_salt: 'alice' }), 0);
  assert.equal(await sgl({ extra_key: 'k', cache_salt: 'alice' }), 96);
  // Chat completions (vLLM's field), reported as prompt_tokens_details.cached_tokens.
  const long = chat({ messages: [{ role: 'user', content: 'tell me '.repeat(40) }], max_tokens: 1 });
  const chatCached = async (salt) => {
    const r = await post('/v1/chat/completions', { ...long, cache_salt: salt });
    assert.equal(r.status, 200, r.text);
    return r.json.usage.prompt_tokens_details.cached_tokens;
  };
  assert.equal(await chatCached('carol'), 0);
  assert.ok((await chatCached('carol')) > 0);
  assert.equal(await chatCached('dave'), 0);
  assertOpenAiError(await post('/v1/chat/completions', { ...long, cache_salt: '' }), 400, 'cache_salt');
  assertOpenAiError(await post('/v1/completions', { model: MODEL, prompt: 'x', cache_salt: 7 }), 400, 'cache_salt');
  assertOpenAiError(await post('/generate', { input_ids: ids, sampling_params: {}, extra_key: '' }), 400,
    'extra_key');
});

// vLLM's return_tokens_as_token_ids: every token of the chat and legacy logprobs (chosen, top
// alternatives, the echoed prompt) is written "token_id:<id>" (chat bytes: that string's), streamed
// or not; the text, the numbers, text_offset and prompt_logprobs stay as without it.
test('return_tokens_as_token_ids writes logprobs tokens as token_id:<id>', async () => {
  const asId = /^token_id:(\d+)$/;
  const idOf = (t) => Number(asId.exec(t)?.[1] ?? NaN);
  const text = async (id) => (await post('/detokenize', { tokens: [id] })).json.prompt;
  const ask = chat({ max_tokens: 4, temperature: 0, ignore_eos: true, logprobs: true, top_logprobs: 2,
    logit_bias: asciiOnly });
  const plain = await post('/v1/chat/completions', ask);
  const ids = await post('/v1/chat/completions', { ...ask, return_tokens_as_token_ids: true });
  assert.equal(ids.status, 200, ids.text);
  assert.equal(ids.json.choices[0].message.content, plain.json.choices[0].message.content);
  const entries = ids.json.choices[0].logprobs.content;
  const plainEntries = plain.json.choices[0].logprobs.content;
  assert.equal(entries.length, 4);
  for (const [i, e] of entries.entries()) {
    assert.match(e.token, asId);
    assert.deepEqual(e.bytes, [...Buffer.from(e.token)]);
    assert.equal(await text(idOf(e.token)), plainEntries[i].token);
    assert.equal(e.logprob, plainEntries[i].logprob);
    assert.equal(e.top_logprobs.length, 2);
    for (const [k, t] of e.top_logprobs.entries()) {
      const want = plainEntries[i].top_logprobs[k];
      assert.match(t.token, asId);
      assert.deepEqual(t.bytes, [...Buffer.from(t.token)]);
      assert.equal(t.logprob, want.logprob);
      // (an alternative may be part of a character: no whole text to compare)
      if (!want.token.includes('\ufffd')) assert.equal(await text(idOf(t.token)), want.token);
    }
  }
  const streamed = await sseEvents('/v1/chat/completions', { ...ask, return_tokens_as_token_ids: true,
    stream: true });
  assert.deepEqual(streamed.flatMap((e) => e.choices[0]?.logprobs?.content ?? []), entries);
  // Completions: the echoed prompt's tokens too, and the top_logprobs keys.
  const prompt = [Tok.HELLO, 40, 41];
  const cmpl = { model: MODEL, prompt, max_tokens: 3, temperature: 0, ignore_eos: true, echo: true,
    logprobs: 2, prompt_logprobs: 1, logit_bias: asciiOnly };
  const before = (await post('/v1/completions', cmpl)).json.choices[0];
  const r = await post('/v1/completions', { ...cmpl, return_tokens_as_token_ids: true });
  assert.equal(r.status, 200, r.text);
  const c = r.json.choices[0];
  assert.equal(c.text, before.text);
  const lp = c.logprobs;
  assert.deepEqual(lp.tokens.slice(0, 3), prompt.map((id) => `token_id:${id}`));
  assert.equal(lp.tokens.length, 6);
  for (const [i, t] of lp.tokens.entries()) assert.equal(await text(idOf(t)), before.logprobs.tokens[i]);
  assert.equal(lp.top_logprobs[0], null);
  for (const top of lp.top_logprobs.slice(1)) {
    assert.ok(Object.keys(top).length >= 2);
    for (const k of Object.keys(top)) assert.match(k, asId);
  }
  assert.deepEqual(lp.token_logprobs, before.logprobs.token_logprobs);
  assert.deepEqual(lp.text_offset, before.logprobs.text_offset);  // offsets into `text`
  assert.deepEqual(c.prompt_logprobs, before.prompt_logprobs);  // as vLLM: keyed by id already
  const ev = await sseEvents('/v1/completions', { ...cmpl, return_tokens_as_token_ids: true, stream: true });
  assert.deepEqual(ev.flatMap((e) => e.choices[0]?.logprobs?.tokens ?? []), lp.tokens);
  assertOpenAiError(await post('/v1/chat/completions', chat({ return_tokens_as_token_ids: 'yes' })), 400,
    'return_tokens_as_token_ids');
  assertOpenAiError(await post('/v1/completions', { model: MODEL, prompt: 'x', return_tokens_as_token_ids: 1 }),
    400, 'return_tokens_as_token_ids');
});

// vLLM's truncate_prompt_tokens: the tokenized prompt's last k tokens (-1: the context) are all
// the model sees, before the context check, the prefix cache and prompt logprobs; usage counts
// them and echo returns their text.
// vLLM's use_beam_search: n is the beam width; width 1 is greedy; each beam's tokens carry the
// logprobs the model gives them (scored again with echo), the beams come best first by
// cumulative logprob / length ^ length_penalty (the prompt counted), and what beam search cannot
// honour is a 400 naming the field.
test('use_beam_search: n beams, best first, each as the model scores it', async () => {
  const prompt = [Tok.HELLO, 40, 41, 42, 43];
  const greedy = (await post('/v1/completions', { model: MODEL, prompt, max_tokens: 6, temperature: 0,
    ignore_eos: true, return_token_ids: true })).json.choices[0];
  const one = await post('/v1/completions', { model: MODEL, prompt, max_tokens: 6, n: 1,
    use_beam_search: true, ignore_eos: true, return_token_ids: true });
  assert.equal(one.status, 200, one.text);
  // Exact on the CPU; on the GPU a step's one-token prefill rounds unlike a decode step, so a
  // near tie may go the other way after the first token.
  if (PREFILL_VS_DECODE < 1e-3) {
    assert.deepEqual(one.json.choices[0].token_ids, greedy.token_ids);
    assert.equal(one.json.choices[0].text, greedy.text);
  } else {
    assert.equal(one.json.choices[0].token_ids[0], greedy.token_ids[0]);
  }
  for (const lengthPenalty of [1, 0]) {
    const r = await post('/v1/completions', { model: MODEL, prompt, max_tokens: 6, n: 4,
      use_beam_search: true, length_penalty: lengthPenalty, ignore_eos: true, logprobs: 0,
      return_token_ids: true });
    assert.equal(r.status, 200, r.text);
    const beams = r.json.choices;
    assert.equal(beams.length, 4);
    assert.equal(new Set(beams.map((c) => c.token_ids.join(','))).size, 4, 'distinct beams');
    const scores = beams.map((c) => {
      assert.equal(c.finish_reason, 'length');
      assert.equal(c.token_ids.length, 6);
      const cum = c.logprobs.token_logprobs.reduce((a, b) => a + b, 0);
      return cum / Math.pow(prompt.length + 6, lengthPenalty);
    });
    for (let i = 1; i < scores.length; ++i) assert.ok(scores[i - 1] >= scores[i], JSON.stringify(scores));
    // The best beam is at least as likely as greedy's continuation.
    const greedyCum = (await post('/v1/completions', { model: MODEL, prompt: prompt.concat(greedy.token_ids),
      max_tokens: 0, echo: true, logprobs: 0 })).json.choices[0].logprobs.token_logprobs.slice(prompt.length)
      .reduce((a, b) => a + b, 0);
    assert.ok(scores[0] * Math.pow(prompt.length + 6, lengthPenalty) >= greedyCum - 6 * PREFILL_VS_DECODE);
    // Each beam's logprobs are the model's: scored again as a prompt, they agree.
    for (const c of beams) {
      const scored = (await post('/v1/completions', { model: MODEL, prompt: prompt.concat(c.token_ids),
        max_tokens: 0, echo: true, logprobs: 0 })).json.choices[0].logprobs.token_logprobs.slice(prompt.length);
      scored.forEach((v, i) => assert.ok(Math.abs(v - c.logprobs.token_logprobs[i]) <= PREFILL_VS_DECODE,
        `${v} vs ${c.logprobs.token_logprobs[i]}`));
    }
    assert.equal(r.json.usage.completion_tokens, 24);
    assert.equal(r.json.usage.prompt_tokens, prompt.length);
  }
  // Chat: each beam parsed as a message; streamed, the same beams arrive before [DONE].
  const chatReq = { model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 5, n: 2,
    use_beam_search: true, ignore_eos: true };
  const chatBeams = await post('/v1/chat/completions', chatReq);
  assert.equal(chatBeams.status, 200, chatBeams.text);
  assert.equal(chatBeams.json.choices.length, 2);
  const streamed = await fetch(`${server.baseUrl}/v1/chat/completions`, { method: 'POST',
    headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...chatReq, stream: true }) });
  const text = await streamed.text();
  assert.ok(text.trimEnd().endsWith('data: [DONE]'), text);
  const contents = ['', ''];
  for (const line of text.split('\n').filter((l) => l.startsWith('data: {'))) {
    const ch = JSON.parse(line.slice(6)).choices[0];
    if (ch?.delta?.content) contents[ch.index] += ch.delta.content;
  }
  assert.deepEqual(contents, chatBeams.json.choices.map((c) => c.message.content));
  // What beam search cannot honour.
  assertOpenAiError(await post('/v1/completions', { model: MODEL, prompt, n: 11, use_beam_search: true }),
    400, 'n');
  assertOpenAiError(await post('/v1/chat/completions', { ...chatReq, ignore_eos: false,
    response_format: { type: 'json_object' } }), 400, 'response_format');
  assertOpenAiError(await post('/v1/completions', { model: MODEL, prompt, use_beam_search: true,
    length_penalty: 'long' }), 400, 'length_penalty');
  assertOpenAiError(await post('/v1/completions', { model: MODEL, prompt, use_beam_search: 1 }), 400,
    'use_beam_search');
  // A client that leaves mid-search: the steps stop and the request is counted as a 499.
  const before = await metrics(server.baseUrl);
  const left = (m) => requestCount(m, (e, st) => e === '/v1/completions' && st === 499) -
    requestCount(before, (e, st) => e === '/v1/completions' && st === 499);
  const body = JSON.stringify({ model: MODEL, prompt, max_tokens: 3000, n: 4, use_beam_search: true,
    ignore_eos: true });
  const sock = net.connect(server.port, '127.0.0.1');
  await new Promise((r) => sock.on('connect', r));
  sock.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
  await new Promise((r) => setTimeout(r, 200));  // steps are running (each too short to observe)
  sock.destroy();
  const deadline = Date.now() + 10000;
  while (left(await metrics(server.baseUrl)) < 1 && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 10));
  assert.equal(left(await metrics(server.baseUrl)), 1);
  await waitForIdle(10000);
});

// vLLM's chat_template (a request's own template, only with --trust-request-chat-template) and
// documents (the template's `documents` variable), on chat, /tokenize and embeddings.
test('chat_template and documents from the request', async () => {
  const own = '{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}' +
    '{% if add_generation_prompt %}<assistant>{% endif %}';
  const messages = [{ role: 'user', content: 'hi' }];
  assertOpenAiError(await post('/v1/chat/completions', chat({ chat_template: own })), 400,
    'chat_template');  // not trusted here
  const trusted = await startServer(['--trust-request-chat-template']);
  try {
    const at = async (path, body) => {
      const r = await fetch(trusted.baseUrl + path, { method: 'POST',
        headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const text = await r.text();
      return { status: r.status, json: JSON.parse(text), text };
    };
    const detok = async (tokens) => (await at('/detokenize', { model: MODEL, tokens })).json.prompt;
    const tok = await at('/tokenize', { model: MODEL, messages, chat_template: own });
    assert.equal(tok.status, 200, tok.text);
    assert.equal(await detok(tok.json.tokens), '<user>hi<assistant>');
    const withDocs = '{% for d in documents %}[{{ d.title }}: {{ d.text }}]{% endfor %}' +
      '{{ messages[-1].content }}';
    const documents = [{ title: 'A', text: 'x' }, { title: 'B', text: 'y' }];
    const docTok = await at('/tokenize', { model: MODEL, messages, chat_template: withDocs, documents });
    assert.equal(await detok(docTok.json.tokens), '[A: x][B: y]hi');
    // The model's own template sees the documents too (tiny-chat's ignores them: same tokens).
    const plainTok = await at('/tokenize', { model: MODEL, messages });
    assert.deepEqual((await at('/tokenize', { model: MODEL, messages, documents })).json.tokens,
      plainTok.json.tokens);
    const done = await at('/v1/chat/completions', { model: MODEL, messages, chat_template: own,
      max_tokens: 2, ignore_eos: true });
    assert.equal(done.status, 200, done.text);
    assert.equal(done.json.usage.prompt_tokens, tok.json.count);
    const embedded = await at('/v1/embeddings', { model: MODEL, messages, chat_template: withDocs,
      documents });
    assert.equal(embedded.status, 200, embedded.text);
    assert.equal(embedded.json.usage.prompt_tokens, docTok.json.count);
    for (const [body, param] of [
      [{ chat_template: '{% for %}' }, 'chat_template'],  // does not parse
      [{ chat_template: "{{ raise_exception('no') }}" }, 'chat_template'],  // the template refuses
      [{ chat_template: 3 }, 'chat_template'],
      [{ chat_template: '' }, 'chat_template'],  // renders nothing
      [{ documents: [{ title: 1 }] }, 'documents'],
      [{ documents: 'x' }, 'documents'],
    ]) {
      const r = await at('/v1/chat/completions', { model: MODEL, messages, max_tokens: 1, ...body });
      assert.equal(r.status, 400, r.text);
      assert.equal(r.json.error.param, param, r.text);
    }
  } finally {
    assert.equal(await trusted.stop(), 0);
  }
});

test('truncate_prompt_tokens keeps the prompt\'s last k tokens', async () => {
  // Past the context (4,096 tokens) unless truncated; cached as the kept tokens.
  const long = 'z9'.repeat(5000);
  const kept = (await post('/tokenize', { model: MODEL, prompt: long })).json.tokens.slice(-40);
  const ask = { model: MODEL, max_tokens: 3, temperature: 0, ignore_eos: true, logit_bias: asciiOnly };
  const cut = await post('/v1/completions', { ...ask, prompt: long, truncate_prompt_tokens: 40, echo: true,
    logprobs: 0 });
  assert.equal(cut.status, 200, cut.text);
  assert.equal(cut.json.usage.prompt_tokens, 40);
  const keptText = (await post('/detokenize', { tokens: kept })).json.prompt;
  const same = await post('/v1/completions', { ...ask, prompt: kept });
  assert.equal(same.json.usage.prompt_tokens_details.cached_tokens, 32);  // 16-token blocks
  const c = cut.json.choices[0];
  assert.equal(c.text, keptText + same.json.choices[0].text);
  assert.equal(c.logprobs.tokens.length, 43);
  // A list: each prompt on its own; a prompt shorter than k is whole; prompt_logprobs cover k.
  const list = await post('/v1/completions', { ...ask, prompt: [long, [Tok.HELLO, 40]], prompt_logprobs: 0,
    truncate_prompt_tokens: 8 });
  assert.equal(list.status, 200, list.text);
  assert.equal(list.json.usage.prompt_tokens, 8 + 2);
  assert.equal(list.json.choices[0].prompt_logprobs.length, 8);
  assert.equal(list.json.choices[1].prompt_logprobs.length, 2);
  assert.equal(list.json.choices[0].text,
    (await post('/v1/completions', { ...ask, prompt: kept.slice(-8) })).json.choices[0].text);
  // Chat: the rendered prompt's last k tokens.
  const messages = [{ role: 'user', content: 'tell me '.repeat(20) }];
  const rendered = (await post('/tokenize', { model: MODEL, messages })).json.tokens;
  const ch = await post('/v1/chat/completions', { ...ask, messages, truncate_prompt_tokens: 12, prompt_logprobs: 0 });
  assert.equal(ch.status, 200, ch.text);
  assert.equal(ch.json.usage.prompt_tokens, 12);
  ch.json.prompt_logprobs.slice(1).forEach((e, i) => assert.ok(e[String(rendered.at(-12 + i + 1))]));
  const whole = await post('/v1/chat/completions', { ...ask, messages, truncate_prompt_tokens: -1 });
  assert.equal(whole.json.usage.prompt_tokens, rendered.length);
  assertOpenAiError(await post('/v1/completions', { ...ask, prompt: long, truncate_prompt_tokens: -1 }), 400);
  for (const bad of [0, -2, 2.5, '8', 4097]) {
    assertOpenAiError(await post('/v1/completions', { ...ask, prompt: 'x', truncate_prompt_tokens: bad }), 400,
      'truncate_prompt_tokens');
    assertOpenAiError(await post('/v1/chat/completions', chat({ truncate_prompt_tokens: bad })), 400,
      'truncate_prompt_tokens');
  }
});

// Reasoning budgets (vLLM's thinking_token_budget, SGLang's thinking_budget, Anthropic's
// thinking.budget_tokens): once the reasoning holds that many tokens, </think> is forced. Here
// logit_bias makes <think> (505) the model's every choice, so only the budget can close it.
test('thinking budgets force </think> once the reasoning holds that many tokens', async () => {
  const ask = { model: MODEL, messages: [{ role: 'user', content: 'think' }], max_tokens: 10, temperature: 0,
    logit_bias: { 505: 100 }, logprobs: true };
  const tokens = (r) => r.json.choices[0].logprobs.content.map((c) => c.token);
  const free = await post('/v1/chat/completions', ask);
  assert.equal(free.status, 200, free.text);
  assert.deepEqual(tokens(free), Array(10).fill('<think>'));
  assert.equal(free.json.choices[0].message.reasoning_content, '<think>'.repeat(9));  // never closed
  for (const [field, budget] of [['thinking_token_budget', 3], ['thinking_budget', 0]]) {
    const r = await post('/v1/chat/completions', { ...ask, [field]: budget });
    assert.equal(r.status, 200, r.text);
    const want = Array(10).fill('<think>');
    want[1 + budget] = '</think>';  // after <think> and `budget` reasoning tokens
    assert.deepEqual(tokens(r), want, field);
    assert.ok(r.json.choices[0].message.reasoning_content.startsWith('<think>'.repeat(budget)), field);
  }
  // Streamed the same; -1 is no limit; a prompt that closed the reasoning needs no budget.
  const ev = await sseEvents('/v1/chat/completions', { ...ask, thinking_token_budget: 3, stream: true });
  const streamed = ev.flatMap((e) => e.choices?.[0]?.logprobs?.content ?? []).map((c) => c.token);
  assert.equal(streamed.indexOf('</think>'), 4);
  const unlimited = await post('/v1/chat/completions', { ...ask, thinking_token_budget: -1 });
  assert.deepEqual(tokens(unlimited), tokens(free));
  const closed = await post('/v1/chat/completions', { ...ask, thinking_token_budget: 1,
    chat_template_kwargs: { enable_thinking: false } });
  assert.equal(closed.status, 200, closed.text);
  assert.ok(!tokens(closed).includes('</think>'));
  // Anthropic's thinking.budget_tokens: <think>, 2 reasoning tokens, the forced </think>, and a
  // last <think> that opens nothing more (5 tokens); unbudgeted, all 4 after the first reason.
  const thought = async (thinking) => {
    const r = await post('/v1/messages', { model: MODEL, max_tokens: 5, temperature: 0,
      messages: [{ role: 'user', content: 'think' }], thinking, logit_bias: { 505: 100 } });
    assert.equal(r.status, 200, r.text);
    return r.json.content.filter((b) => b.type === 'thinking').map((b) => b.thinking).join('|');
  };
  assert.equal(await thought({ type: 'enabled', budget_tokens: 2 }), '<think>'.repeat(2));
  assert.equal(await thought({ type: 'enabled' }), '<think>'.repeat(4));
  assertOpenAiError(await post('/v1/chat/completions', { ...ask, thinking_token_budget: -5 }), 400,
    'thinking_token_budget');
  assertOpenAiError(await post('/v1/chat/completions', { ...ask, thinking_token_budget: 3, thinking_budget: 3 }),
    400, 'thinking_budget');
});

// vLLM's token filters: allowed_token_ids leaves only those tokens to sample, bad_words takes a
// word's last token out wherever the output ends with the ones before it (the added token "Hello"
// is one word of one token here); both on completions and chat, bad values 400s naming the field.
test("vLLM's token filters: allowed_token_ids and bad_words", async () => {
  const ask = { model: MODEL, prompt: 'hi', max_tokens: 4, temperature: 0, ignore_eos: true };
  const text = (r) => { assert.equal(r.status, 200, r.text); return r.json.choices[0].text; };
  assert.equal(text(await post('/v1/completions', { ...ask, allowed_token_ids: [511] })), 'Hello'.repeat(4));
  const chatOnly = await post('/v1/chat/completions', chat({ max_tokens: 3, temperature: 0, ignore_eos: true,
    allowed_token_ids: [511, 511] }));
  assert.equal(chatOnly.status, 200, chatOnly.text);
  assert.equal(chatOnly.json.choices[0].message.content, 'Hello'.repeat(3));
  const favoured = { ...ask, logit_bias: { 511: 100 } };
  assert.equal(text(await post('/v1/completions', favoured)), 'Hello'.repeat(4));
  const banned = text(await post('/v1/completions', { ...favoured, bad_words: ['Hello'] }));
  assert.equal(banned.length > 0 && !banned.includes('Hello'), true, banned);
  // (tiny-chat also has a BPE "Hello", 471, which the word's tokens do not name: as in vLLM.)
  const bannedChat = await post('/v1/chat/completions', chat({ max_tokens: 3, temperature: 0,
    logit_bias: { 511: 100, 471: -100 }, bad_words: [' Hello'] }));
  assert.equal(bannedChat.status, 200, bannedChat.text);
  assert.ok(!bannedChat.json.choices[0].message.content.includes('Hello'), bannedChat.text);
  for (const [extra, param] of [[{ allowed_token_ids: [] }, 'allowed_token_ids'],
    [{ allowed_token_ids: [-1] }, 'allowed_token_ids'], [{ allowed_token_ids: [999999] }, 'allowed_token_ids'],
    [{ bad_words: 'Hello' }, 'bad_words'], [{ bad_words: ['  '] }, 'bad_words'], [{ bad_words: [7] }, 'bad_words'],
    [{ allowed_token_ids: [511], bad_words: ['Hello'] }, 'bad_words']])
    assertOpenAiError(await post('/v1/completions', { ...ask, ...extra }), 400, param);
});

// A conversation whose last message stays open (vLLM's continue_final_message; an Anthropic
// conversation ending with an assistant message, a prefill): the prompt ends with that message's
// text, and the output continues it as a completion of that prompt would.
test('continue_final_message and Anthropic prefills continue the final message', async () => {
  const convo = [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'Hel' }];
  const open = await post('/tokenize', { model: MODEL, messages: convo, continue_final_message: true,
    add_generation_prompt: false });
  assert.equal(open.status, 200, open.text);
  const closed = await post('/tokenize', { model: MODEL, messages: convo });
  const text = async (tokens) => (await post('/detokenize', { model: MODEL, tokens })).json.prompt;
  assert.ok((await text(open.json.tokens)).endsWith('</think>\n\nHel'), await text(open.json.tokens));
  assert.ok(!(await text(closed.json.tokens)).endsWith('Hel'));
  const ask = { model: MODEL, max_tokens: 4, temperature: 0, ignore_eos: true, logprobs: true };
  const cont = await post('/v1/chat/completions', { ...ask, messages: convo, continue_final_message: true });
  assert.equal(cont.status, 200, cont.text);
  const comp = await post('/v1/completions', { ...ask, prompt: open.json.tokens, logprobs: 0 });
  assert.equal(cont.json.usage.prompt_tokens, open.json.count);
  assert.deepEqual(cont.json.choices[0].logprobs.content.map((c) => c.token), comp.json.choices[0].logprobs.tokens);
  assert.equal(cont.json.choices[0].message.content, comp.json.choices[0].text);  // without the prefill
  const prefill = await post('/v1/messages', { model: MODEL, max_tokens: 4, temperature: 0, messages: convo });
  assert.equal(prefill.status, 200, prefill.text);
  const u = prefill.json.usage;  // input_tokens counts the uncached part, as Anthropic's
  assert.equal(u.input_tokens + (u.cache_read_input_tokens ?? 0), open.json.count, prefill.text);
  assertOpenAiError(await post('/v1/chat/completions', { ...ask, messages: convo, continue_final_message: true,
    add_generation_prompt: true }), 400, 'continue_final_message');
  assertAnthropicError(await post('/v1/messages', { model: MODEL, max_tokens: 4,
    messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'Hel ' }] }), 400, 'invalid_request_error');
  // tiny-chat's template (Qwen3's) moves text before </think> into the reasoning: not as given.
  assertOpenAiError(await post('/v1/chat/completions', { ...ask, continue_final_message: true,
    messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'a</think>b' }] }), 400, 'messages');
});

// SGLang's update_weights_from_disk for RL loops: the next requests run on the new weights and
// reuse no prefix cached under the old ones; another architecture or a bad path is a 400 with
// success false that leaves the old weights serving; /flush_cache and vLLM's /reset_prefix_cache
// drop cached prefixes; a server without --enable-weight-updates refuses.
test('update_weights_from_disk swaps the weights; flush_cache empties the prefix cache', async () => {
  const ask = { model: MODEL, prompt: Array.from({ length: 40 }, (_, i) => 20 + i), max_tokens: 8,
    temperature: 0, ignore_eos: true };
  const run = async () => {
    const r = await post('/v1/completions', ask);
    assert.equal(r.status, 200, r.text);
    return { text: r.json.choices[0].text, cached: r.json.usage.prompt_tokens_details.cached_tokens };
  };
  const old = await run();
  assert.equal((await run()).cached, 32);  // its prompt's full blocks are cached
  const update = (body) => post('/update_weights_from_disk', body);
  const info = async () => (await fetch(server.baseUrl + '/get_model_info')).json();
  const version = async () => (await (await fetch(server.baseUrl + '/get_weight_version')).json()).weight_version;
  const first = await info();
  assert.equal(first.model_path, path.join(repoRoot, 'models/tiny-beam'));
  assert.equal(first.tokenizer_path, path.join(repoRoot, 'tests/server/fixtures/tiny-chat'));
  assert.equal(first.is_generation, true);
  assert.equal(first.weight_version, 'default');
  const dir = tinyBeamWithReversedEmbedding();
  const otherWindow = tinyBeamCopy();  // another architecture: the same tensors, another window
  const configPath = path.join(otherWindow, 'config.json');
  const config = JSON.parse(fs.readFileSync(configPath, 'utf8'));
  fs.writeFileSync(configPath, JSON.stringify({ ...config, sliding_window: 2 * config.sliding_window }));
  try {
    const ok = await update({ model_path: dir, abort_all_requests: false, weight_version: 'step-1' });
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual(ok.json, { success: true, message: 'Succeeded to update model weights.', num_paused_requests: 0 });
    assert.equal((await info()).model_path, dir);
    assert.equal(await version(), 'step-1');
    const generated = await post('/generate', { input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 1 } });
    assert.equal(generated.json.meta_info.weight_version, 'step-1');  // SGLang's meta_info
    const swapped = await run();
    assert.notEqual(swapped.text, old.text);
    assert.equal(swapped.cached, 0);
    for (const [body, words] of [[{ model_path: otherWindow }, "differs from the served model's in 'sliding_window'"],
      [{ model_path: path.join(dir, 'missing') }, 'missing']]) {
      const bad = await update(body);
      assert.equal(bad.status, 400, bad.text);
      assert.equal(bad.json.success, false);
      assert.ok(bad.json.message.includes(words), bad.text);
    }
    assert.equal((await run()).text, swapped.text);
    assertOpenAiError(await update({}), 400, 'model_path');
    assertOpenAiError(await update({ model_path: dir, flush_cache: false }), 400, 'flush_cache');
    assert.equal(await version(), 'step-1');  // failed updates change nothing
    assert.equal((await update({ model_path: path.join(repoRoot, 'models/tiny-beam') })).status, 200);
    assert.equal((await run()).text, old.text);
    assert.equal((await info()).model_path, path.join(repoRoot, 'models/tiny-beam'));
    assert.equal(await version(), 'step-1');  // kept unless an update names another
  } finally {  // the later tests expect tiny-beam's weights, whatever failed here
    const tinyBeam = path.join(repoRoot, 'models/tiny-beam');
    if ((await info()).model_path !== tinyBeam) await update({ model_path: tinyBeam });
    for (const d of [dir, otherWindow]) fs.rmSync(d, { recursive: true, force: true });
  }
  for (const route of ['/flush_cache', '/reset_prefix_cache']) {
    assert.equal((await run()).cached, 32);
    const r = await post(route, {});
    assert.equal(r.status, 200, r.text);
    assert.equal((await run()).cached, 0, route);
  }
  const plain = await startServer();
  try {
    const r = await fetch(plain.baseUrl + '/update_weights_from_disk', { method: 'POST',
      headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model_path: 'x' }) });
    assert.equal(r.status, 400);
    assert.match((await r.json()).message, /--enable-weight-updates/);
  } finally {
    assert.equal(await plain.stop(), 0);
  }
});

// GET with a JSON body, as SGLang's Python client sends it (fetch refuses a GET body).
function getWithBody(route, body) {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = http.request(server.baseUrl + route, { method: 'GET',
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } },
    (res) => {
      let text = '';
      res.on('data', (c) => { text += c; });
      res.on('end', () => resolve({ status: res.statusCode, text, json: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

// SGLang's get_weights_by_name: a served tensor's first rows (JSON body or query string; rows of
// a matrix, values of a vector) as loaded, following update_weights_from_disk (tiny-beam with its
// embedding rows reversed: the new first row is the old last one; /metrics counts the updates);
// bad names and sizes are 400s naming the field; a server without --enable-weight-updates refuses.
test('get_weights_by_name reads the served tensors and follows weight updates', async () => {
  const query = async (q) => {
    const r = await fetch(server.baseUrl + '/get_weights_by_name?' + q);
    const text = await r.text();
    return { status: r.status, text, json: JSON.parse(text) };
  };
  const q = await getWithBody('/get_weights_by_name', { name: 'model.layers.1.self_attn.q_proj.weight', truncate_size: 2 });
  assert.equal(q.status, 200, q.text);
  assert.equal(q.json.length, 2);
  assert.equal(q.json[0].length, 64);  // tiny-beam's hidden width
  assert.deepEqual((await query('name=model.layers.1.self_attn.q_proj.weight&truncate_size=2')).json, q.json);
  const bias = await query('name=model.layers.0.self_attn.gate_bias');
  assert.equal(bias.json.length, 4);  // a vector: its values (4 heads), fewer than the default 100
  const expert = await query('name=model.layers.5.mlp.experts.15.down_proj.weight&truncate_size=3');
  assert.equal(expert.status, 200, expert.text);
  assert.deepEqual([expert.json.length, expert.json[0].length], [3, 32]);
  const embed = await query('name=model.embed_tokens.weight&truncate_size=512');
  assert.equal(embed.json.length, 512);
  const dir = tinyBeamWithReversedEmbedding();
  const update = (body) => post('/update_weights_from_disk', body);
  const updates = async () => (await metrics(server.baseUrl)).beamserve_weight_update_seconds_count ?? 0;
  const updatesBefore = await updates();
  try {
    assert.equal((await update({ model_path: dir })).status, 200);
    const reversed = await query('name=model.embed_tokens.weight&truncate_size=1');
    assert.deepEqual(reversed.json[0], embed.json[511]);
  } finally {
    assert.equal((await update({ model_path: path.join(repoRoot, 'models/tiny-beam') })).status, 200);
    fs.rmSync(dir, { recursive: true, force: true });
  }
  assert.deepEqual((await query('name=model.embed_tokens.weight&truncate_size=1')).json[0], embed.json[0]);
  assert.equal(await updates(), updatesBefore + 2);  // /metrics' weight-update histogram
  assertOpenAiError(await query('name=model.layers.1.mlp.experts.16.up_proj.weight'), 400, 'name');
  assertOpenAiError(await query('name=lm_head'), 400, 'name');
  assertOpenAiError(await query('truncate_size=2'), 400, 'name');
  assertOpenAiError(await query('name=lm_head.weight&truncate_size=0'), 400, 'truncate_size');
  assertOpenAiError(await query('name=lm_head.weight&truncate_size=2x'), 400, 'truncate_size');
  assertOpenAiError(await query('name=lm_head.weight&truncate_size=100000000'), 400, 'truncate_size');
  assertOpenAiError(await getWithBody('/get_weights_by_name', { name: 7 }), 400, 'name');
  const plain = await startServer();
  try {
    const r = await fetch(plain.baseUrl + '/get_weights_by_name?name=lm_head.weight');
    assert.equal(r.status, 400);
    assert.match((await r.json()).error.message, /--enable-weight-updates/);
  } finally {
    assert.equal(await plain.stop(), 0);
  }
});

// LoRA merged as the weights load: serve --merge-lora and update_weights_from_disk's
// merge_lora_path give the same outputs, other than the base's; an update without it goes back to
// the base; an adapter that does not fit is a 400 naming it, the old weights serving on.
test('a LoRA adapter merges at start-up and on weight updates', async () => {
  const ask = { model: MODEL, prompt: Array.from({ length: 12 }, (_, i) => 30 + i), max_tokens: 8,
    temperature: 0, ignore_eos: true };
  const textOf = async (s) => {
    const r = await fetch(s.baseUrl + '/v1/completions', { method: 'POST',
      headers: { 'content-type': 'application/json' }, body: JSON.stringify(ask) });
    const j = await r.json();
    assert.equal(r.status, 200, JSON.stringify(j));
    return j.choices[0].text;
  };
  const update = (body) => post('/update_weights_from_disk', body);
  const tinyBeam = path.join(repoRoot, 'models/tiny-beam');
  const lora = tinyBeamLora();
  const merged = await startServer(['--merge-lora', lora]);
  let serverMerged = false;
  try {
    const base = await textOf(server);
    const adapted = await textOf(merged);
    assert.notEqual(adapted, base);
    const ok = await update({ model_path: tinyBeam, merge_lora_path: lora, weight_version: 'lora-1' });
    assert.equal(ok.status, 200, ok.text);
    serverMerged = true;
    assert.equal(await textOf(server), adapted);
    fs.rmSync(path.join(lora, 'adapter_config.json'));
    const bad = await update({ model_path: tinyBeam, merge_lora_path: lora });
    assert.equal(bad.status, 400, bad.text);
    assert.ok(bad.json.message.includes(lora), bad.text);
    assert.equal(await textOf(server), adapted);  // the merged weights serve on
    assert.equal((await update({ model_path: tinyBeam })).status, 200);
    serverMerged = false;
    assert.equal(await textOf(server), base);
  } finally {  // the later tests expect tiny-beam's own weights, whatever failed here
    assert.equal(await merged.stop(), 0);
    if (serverMerged) await update({ model_path: tinyBeam });
    fs.rmSync(lora, { recursive: true, force: true });
  }
});

// LoRA adapters served per request (--lora-modules, --max-loras): each is a model of its name in
// /v1/models and in "model" (the response names it), SGLang's lora_path takes its name or folder,
// and both give the same tokens, other than the base's; vLLM's /v1/load_lora_adapter /
// unload_lora_adapter and SGLang's /load_lora_adapter / unload_lora_adapter add and remove them;
// unknown names are 404s, loads past --max-loaded-loras are 400s naming it, a server without LoRA
// refuses loads naming the flag.
test('LoRA adapters are served per request and loaded at run time', async () => {
  const lora = tinyBeamLora();
  const s = await startServer(['--lora-modules', `a=${lora}`, '--max-loras', '2', '--max-lora-rank', '8',
    '--max-loaded-loras', '3']);
  const at = async (route, body) => {
    const r = await fetch(s.baseUrl + route, { method: 'POST',
      headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const text = await r.text();
    let json = null;
    try { json = JSON.parse(text); } catch { /* a text answer */ }
    return { status: r.status, json, text };
  };
  const prompt = Array.from({ length: 12 }, (_, i) => 30 + i);
  const complete = async (model) => {
    const r = await at('/v1/completions', { model, prompt, max_tokens: 8, temperature: 0, ignore_eos: true });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.model, model);
    return r.json.choices[0].text;
  };
  const sglang = async (lora_path) => {
    const r = await at('/generate', { input_ids: prompt, lora_path,
      sampling_params: { max_new_tokens: 8, temperature: 0, ignore_eos: true } });
    assert.equal(r.status, 200, r.text);
    return r.json.text;
  };
  try {
    const models = await (await fetch(s.baseUrl + '/v1/models')).json();
    assert.deepEqual(models.data.map((m) => m.id), [MODEL, 'a']);
    assert.equal(models.data[1].parent, MODEL);
    assert.equal(models.data[1].root, lora);
    const info = await (await fetch(s.baseUrl + '/get_server_info')).json();
    assert.deepEqual([info.enable_lora, info.max_loras_per_batch, info.max_lora_rank, info.lora_paths,
      info.lora_experts, info.max_loaded_loras], [true, 2, 8, { a: lora }, false, 3]);
    const base = await complete(MODEL);
    const adapted = await complete('a');
    assert.notEqual(adapted, base);
    assert.equal(await sglang('a'), adapted);
    assert.equal(await sglang(lora), adapted);  // by its folder
    assert.equal(await sglang(null), base);
    const chatted = await at('/v1/chat/completions', chat({ model: 'a' }));
    assert.equal(chatted.status, 200, chatted.text);
    assert.equal(chatted.json.model, 'a');

    // vLLM's run-time loading: the same folder as "b" serves the same tokens.
    const loaded = await at('/v1/load_lora_adapter', { lora_name: 'b', lora_path: lora });
    assert.equal(loaded.status, 200, loaded.text);
    assert.match(loaded.text, /Success: LoRA adapter 'b' added/);
    assert.equal(await complete('b'), adapted);
    assertOpenAiError(await at('/v1/load_lora_adapter', { lora_name: 'b', lora_path: lora }), 400, 'lora_name');
    assertOpenAiError(await at('/v1/load_lora_adapter', { lora_name: 'c' }), 400, 'lora_path');
    const missing = await at('/v1/load_lora_adapter', { lora_name: 'c', lora_path: '/nonexistent' });
    assertOpenAiError(missing, 400, 'lora_name');
    assert.match(missing.json.error.message, /\/nonexistent\/adapter_config\.json/);
    // SGLang's: {"success", "loaded_adapters"}; pinned true keeps the adapter in its slot, at
    // most --max-loras - 1 (here 1) of them.
    const pinned = await at('/load_lora_adapter', { lora_name: 'p', lora_path: lora, pinned: true });
    assert.equal(pinned.status, 200, pinned.text);
    assert.equal(pinned.json.success, true);
    assert.equal(await complete('p'), adapted);
    assert.equal(await complete('a'), adapted);  // the other slot still serves the rest
    assert.equal(await complete('b'), adapted);
    const second = await at('/load_lora_adapter', { lora_name: 'b', lora_path: lora, load_inplace: true, pinned: true });
    assert.equal(second.status, 400, second.text);
    assert.match(second.json.error_message, /at most 1 adapters may be pinned .*; pinned now: p/);
    assert.equal((await at('/unload_lora_adapter', { lora_name: 'p' })).json.success, true);
    const c = await at('/load_lora_adapter', { lora_name: 'c', lora_path: lora, pinned: false });
    assert.equal(c.status, 200, c.text);
    assert.equal(c.json.success, true);
    assert.deepEqual(c.json.loaded_adapters, { a: lora, b: lora, c: lora });
    const full = await at('/v1/load_lora_adapter', { lora_name: 'd', lora_path: lora });
    assertOpenAiError(full, 400, 'lora_name');
    assert.match(full.json.error.message, /3 adapters are loaded, the most max_loaded_loras \(--max-loaded-loras\) allows/);
    const gone = await at('/unload_lora_adapter', { lora_name: 'c' });
    assert.equal(gone.json.success, true, gone.text);
    assert.deepEqual(gone.json.loaded_adapters, { a: lora, b: lora });
    const again = await at('/unload_lora_adapter', { lora_name: 'c' });
    assert.equal(again.status, 400);
    assert.equal(again.json.success, false);
    assert.match(again.json.error_message, /no LoRA adapter named 'c'/);
    assert.equal((await at('/v1/unload_lora_adapter', { lora_name: 'b' })).status, 200);
    assertOpenAiError(await at('/v1/unload_lora_adapter', { lora_name: 'b' }), 404, 'lora_name');
    assertOpenAiError(await at('/v1/completions', { model: 'b', prompt, max_tokens: 1 }), 404, 'model');
    assertOpenAiError(await at('/generate', { input_ids: prompt, lora_path: 'b', sampling_params: {} }),
      404, 'lora_path');
    // vLLM's load_inplace (RL loops saving the adapter each step): "a" now serves another adapter.
    const other = tinyBeamLora(99);
    try {
      const swapped = await at('/v1/load_lora_adapter', { lora_name: 'a', lora_path: other, load_inplace: true });
      assert.equal(swapped.status, 200, swapped.text);
      const next = await complete('a');
      assert.notEqual(next, adapted);
      // Under the served name, an adapter shadows the base model; unloaded, the base is back.
      assert.equal((await at('/v1/load_lora_adapter', { lora_name: MODEL, lora_path: other })).status, 200);
      assert.equal(await complete(MODEL), next);
      assert.equal((await at('/v1/unload_lora_adapter', { lora_name: MODEL })).status, 200);
      assert.equal(await complete(MODEL), base);
    } finally {
      fs.rmSync(other, { recursive: true, force: true });
    }
    assert.equal((await fetch(s.baseUrl + '/v1/models/a')).status, 200);
    const scraped = await (await fetch(s.baseUrl + '/metrics')).text();
    assert.match(scraped, /beamserve_lora_requests_info\{running_lora_adapters="",waiting_lora_adapters="",max_lora="2"\} \d/);
    assert.equal((await fetch(s.baseUrl + '/v1/models/b')).status, 404);
  } finally {
    assert.equal(await s.stop(), 0);
    fs.rmSync(lora, { recursive: true, force: true });
  }
  // The shared server serves no adapters.
  const off = await post('/v1/load_lora_adapter', { lora_name: 'a', lora_path: '/tmp' });
  assertOpenAiError(off, 400);
  assert.match(off.json.error.message, /--max-loras/);
});

// --lora-resolver-dir (vLLM's filesystem LoRA resolver): a request naming an adapter not loaded
// loads <dir>/<name> when that folder holds an adapter_config.json, then lists and serves it like
// one loaded at start; a name with no such folder (or one that is not a plain folder name) is a
// 404, a folder whose adapter does not load a 400 naming it; SGLang's lora_path resolves alike.
test('--lora-resolver-dir loads the adapters requests name', async () => {
  const lora = tinyBeamLora();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'beam-resolver-'));
  fs.cpSync(lora, path.join(dir, 'tuned'), { recursive: true });
  fs.cpSync(lora, path.join(dir, 'sg'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'broken'));
  fs.writeFileSync(path.join(dir, 'broken', 'adapter_config.json'), '{"peft_type": "LORA", "lora_alpha": 8}');
  const s = await startServer(['--lora-resolver-dir', dir, '--max-loras', '2', '--max-lora-rank', '8']);
  const complete = async (model) => {
    const r = await fetch(s.baseUrl + '/v1/completions', { method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, prompt: [30, 31, 32, 33], max_tokens: 4, temperature: 0, ignore_eos: true }) });
    return { status: r.status, json: await r.json() };
  };
  try {
    let models = await (await fetch(s.baseUrl + '/v1/models')).json();
    assert.deepEqual(models.data.map((m) => m.id), [MODEL]);
    const tuned = await complete('tuned');
    assert.equal(tuned.status, 200, JSON.stringify(tuned.json));
    assert.equal(tuned.json.model, 'tuned');
    const base = await complete(MODEL);
    assert.notEqual(tuned.json.choices[0].text, base.json.choices[0].text);
    models = await (await fetch(s.baseUrl + '/v1/models')).json();
    assert.deepEqual(models.data.map((m) => m.id), [MODEL, 'tuned']);
    assert.equal(models.data[1].root, path.join(dir, 'tuned'));
    assert.equal((await complete('tuned')).json.choices[0].text, tuned.json.choices[0].text);
    for (const name of ['nope', '..', `tuned/../tuned`]) assert.equal((await complete(name)).status, 404, name);
    // SGLang's lora_path resolves the same way
    const sg = await fetch(s.baseUrl + '/generate', { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ input_ids: [30, 31, 32, 33], lora_path: 'sg',
        sampling_params: { max_new_tokens: 4, temperature: 0, ignore_eos: true } }) });
    assert.equal(sg.status, 200, await sg.clone().text());
    assert.equal((await sg.json()).text, tuned.json.choices[0].text);
    const broken = await complete('broken');
    assert.equal(broken.status, 400);
    assert.match(broken.json.error.message, /'broken'.*does not load/);
  } finally {
    assert.equal(await s.stop(), 0);
    fs.rmSync(lora, { recursive: true, force: true });
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// --lora-modules as vLLM takes it: several values after one flag (nargs='+'), the flag repeated,
// comma-separated pairs and vLLM's JSON form {"name", "path", "base_model_name"}; SGLang's
// --lora-paths (NAME=DIR, a bare DIR named by itself, {"lora_name", "lora_path"}) and
// --max-loras-per-batch; a JSON value with an unknown key stops the start naming it.
test('--lora-modules and --lora-paths take vLLM\'s and SGLang\'s forms', async () => {
  const lora = tinyBeamLora();
  const s = await startServer(['--lora-modules', `a=${lora},b=${lora}`,
    JSON.stringify({ name: 'c', path: lora, base_model_name: 'some/hub-id' }),
    '--max-loras-per-batch', '2', '--max-lora-rank', '8', '--lora-modules', `d=${lora}`,
    '--lora-paths', `e=${lora}`, lora, JSON.stringify({ lora_name: 'f', lora_path: lora, pinned: true })]);
  try {
    const models = await (await fetch(s.baseUrl + '/v1/models')).json();
    assert.equal(models.data[0].id, MODEL);
    assert.deepEqual(models.data.slice(1).map((m) => m.id).sort(), ['a', 'b', 'c', 'd', 'e', lora, 'f'].sort());
    const info = await (await fetch(s.baseUrl + '/get_server_info')).json();
    assert.equal(info.max_loras_per_batch, 2);
    assert.ok(models.data.slice(1).every((m) => m.parent === MODEL && m.root === lora));
  } finally {
    assert.equal(await s.stop(), 0);
  }
  try {
    await assert.rejects(startServer(['--lora-modules', JSON.stringify({ name: 'c', path: lora, colour: 'red' })]),
      /unknown key 'colour'/);
    await assert.rejects(startServer(['--lora-paths', JSON.stringify({ lora_name: 'c', lora_path: lora, pinned: true }),
      '--max-loras', '1']), /cannot pin LoRA adapter 'c': at most 0 adapters may be pinned/);
  } finally {
    fs.rmSync(lora, { recursive: true, force: true });
  }
});

// Speculative-decoding flags in vLLM's JSON and SGLang's form; a bad value stops the start naming
// it (an unknown key, a method needing a draft model, both forms, a block without drafts).
test('--speculative-config and --speculative-algorithm NGRAM', async () => {
  const s = await startServer(['--speculative-algorithm', 'NGRAM', '--speculative-num-draft-tokens', '6',
    '--speculative-ngram-max-match-window-size', '5', '--speculative-ngram-capacity', '100000']);
  try {
    const info = await (await fetch(s.baseUrl + '/get_server_info')).json();
    assert.equal(info.speculative_algorithm, 'NGRAM');
    assert.equal(info.speculative_num_draft_tokens, 6);
    assert.equal(info.speculative_ngram_min_match_window_size, 1);
    assert.equal(info.speculative_ngram_max_match_window_size, 5);
    assert.equal(info.speculative_ngram_capacity, 100000);
    const r = await fetch(s.baseUrl + '/v1/completions', { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, prompt: [5, 6, 7, 8, 5, 6, 7, 8, 5, 6], max_tokens: 12, temperature: 0 }) });
    assert.equal(r.status, 200);
    assert.equal((await r.json()).usage.completion_tokens, 12);
    const metrics = await (await fetch(s.baseUrl + '/metrics')).text();
    assert.match(metrics, /^beamserve_spec_decode_num_draft_tokens_total [1-9]/m);
  } finally {
    assert.equal(await s.stop(), 0);
  }
  const vllm = (config) => ['--speculative-config', JSON.stringify(config)];
  await assert.rejects(startServer(vllm({ method: 'ngram', num_speculative_tokens: 3, colour: 'red' })),
    /--speculative-config: unknown key 'colour'/);
  await assert.rejects(startServer(vllm({ method: 'eagle', num_speculative_tokens: 3 })),
    /method 'eagle' is not served: beamserve drafts with n-grams \("method": "ngram"\) or a DFlash2 drafter/);
  await assert.rejects(startServer(vllm({ method: 'ngram' })), /'num_speculative_tokens' \(>= 1\) is required/);
  await assert.rejects(startServer(vllm({ method: 'ngram', num_speculative_tokens: 3, prompt_lookup_min: 4, prompt_lookup_max: 2 })),
    /n-gram lengths: need 1 <= min \(4\) <= max \(2\)/);
  await assert.rejects(startServer([...vllm({ method: 'ngram', num_speculative_tokens: 3 }), '--speculative-algorithm', 'NGRAM']),
    /are one setting: give one form/);
  await assert.rejects(startServer(['--speculative-num-draft-tokens', '4']), /need --speculative-algorithm NGRAM/);
  await assert.rejects(startServer(['--speculative-algorithm', 'NGRAM', '--speculative-num-draft-tokens', '1']),
    /at least 2, got 1/);
  await assert.rejects(startServer(['--speculative-algorithm', 'NGRAM', '--speculative-ngram-capacity', '-5']),
    /--speculative-ngram-capacity -5 is outside \[0, 1073741824\] tokens/);
});

// DFlash2 drafts (docs/dflash2.md) in SGLang's and vLLM's forms, on the server's device: the
// drafter in /get_server_info, drafts verified, and a bad setting stops the start naming it.
test('--speculative-algorithm DFLASH and --speculative-config {"method": "dflash"}', async () => {
  const drafter = path.join(repoRoot, 'models/tiny-beam-dflash2');
  const s = await startServer(['--speculative-algorithm', 'DFLASH', '--speculative-draft-model-path', drafter]);
  try {
    const info = await (await fetch(s.baseUrl + '/get_server_info')).json();
    assert.equal(info.speculative_algorithm, 'DFLASH');
    assert.equal(info.speculative_draft_model_path, drafter);
    assert.equal(info.speculative_num_draft_tokens, 4);  // the drafter's block
    const r = await fetch(s.baseUrl + '/v1/completions', { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, prompt: [5, 6, 7, 8, 9, 10], max_tokens: 12, temperature: 0 }) });
    assert.equal(r.status, 200);
    assert.equal((await r.json()).usage.completion_tokens, 12);
    // The engine publishes its numbers after the step that answered: poll briefly.
    let metrics = '';
    for (let i = 0; i < 100; ++i) {
      metrics = await (await fetch(s.baseUrl + '/metrics')).text();
      if (/^beamserve_dflash2_context_pages\{state="cached"\} [1-9]/m.test(metrics)) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.match(metrics, /^beamserve_spec_decode_num_draft_tokens_total [1-9]/m);
    // The drafter's context pool: the finished request's context is kept (cached).
    assert.match(metrics, /^beamserve_dflash2_context_pages\{state="free"\} [1-9]/m);
    assert.match(metrics, /^beamserve_dflash2_context_pages\{state="cached"\} [1-9]/m);
  } finally {
    assert.equal(await s.stop(), 0);
  }
  const v = await startServer(['--speculative-config', JSON.stringify({ method: 'dflash', model: drafter, num_speculative_tokens: 2 })]);
  try {
    const info = await (await fetch(v.baseUrl + '/get_server_info')).json();
    assert.equal(info.speculative_algorithm, 'DFLASH');
    assert.equal(info.speculative_num_draft_tokens, 3);
  } finally {
    assert.equal(await v.stop(), 0);
  }
  const vllm = (config) => ['--speculative-config', JSON.stringify(config)];
  await assert.rejects(startServer(vllm({ method: 'dflash' })), /method 'dflash' needs "model"/);
  await assert.rejects(startServer(vllm({ method: 'dflash', model: drafter, num_speculative_tokens: 5 })),
    /5 speculative tokens asked for, the DFlash2 drafter drafts at most 3/);
  await assert.rejects(startServer(vllm({ method: 'dflash', model: drafter, prompt_lookup_max: 3 })),
    /'prompt_lookup_max' is an n-gram setting/);
  await assert.rejects(startServer(['--speculative-algorithm', 'DFLASH']), /DFLASH needs --speculative-draft-model-path/);
  await assert.rejects(startServer(['--speculative-algorithm', 'NGRAM', '--speculative-draft-model-path', drafter]),
    /--speculative-draft-model-path needs --speculative-algorithm DFLASH/);
  await assert.rejects(startServer(['--speculative-algorithm', 'DFLASH', '--speculative-draft-model-path',
    path.join(repoRoot, 'models/tiny-beam')]), /dflash_config/);
});

// The hierarchical cache's flags (SGLang's): the host tier's settings in /get_server_info, its
// series in /metrics, and a bad value stops the start naming it.
test('--enable-hierarchical-cache and its --hicache-* flags', async () => {
  const s = await startServer(['--enable-hierarchical-cache', '--hicache-size', '0.01',
    '--hicache-write-policy', 'write_through_selective']);
  try {
    const info = await (await fetch(s.baseUrl + '/get_server_info')).json();
    assert.equal(info.enable_hierarchical_cache, true);
    assert.equal(info.hicache_size, 0.01);
    assert.equal(info.hicache_write_policy, 'write_through_selective');
    const r = await fetch(s.baseUrl + '/v1/completions', { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, prompt: [5, 6, 7, 8, 9], max_tokens: 4, temperature: 0 }) });
    assert.equal(r.status, 200);
    const metrics = await (await fetch(s.baseUrl + '/metrics')).text();
    assert.match(metrics, /^beamserve_hicache_blocks\{pool="full",state="total"\} [1-9]\d*$/m);
    assert.match(metrics, /^beamserve_hicache_restored_tokens_total 0$/m);
  } finally {
    assert.equal(await s.stop(), 0);
  }
  const plain = await (await fetch(server.baseUrl + '/metrics')).text();
  assert.doesNotMatch(plain, /beamserve_hicache_/);
  await assert.rejects(startServer(['--hicache-ratio', '3']), /--hicache-ratio needs --enable-hierarchical-cache/);
  await assert.rejects(startServer(['--enable-hierarchical-cache', '--hicache-ratio', '0']),
    /--hicache-ratio must be in \[1e-06, 1e\+06\], got 0/);
  await assert.rejects(startServer(['--enable-hierarchical-cache', '--hicache-size', '-1']),
    /--hicache-size must be a positive number of GB/);
  await assert.rejects(startServer(['--enable-hierarchical-cache', '--hicache-write-policy', 'write_around']),
    /--hicache-write-policy write_around: expected write_back, write_through or write_through_selective/);
  await assert.rejects(startServer(['--enable-hierarchical-cache', '--no-prefix-cache']),
    /hierarchical cache .* needs the prefix cache/);
});

// --lora-experts: an adapter on the routed experts is served per request (its tokens differ from
// the same adapter without its expert modules); without the flag loading it is a 400 naming it.
test('LoRA adapters on the routed experts need --lora-experts', async () => {
  const experts = tinyBeamLora(11, TINY_BEAM_EXPERT_MODULES);
  const plain = tinyBeamLora(11);
  const load = async (server, name, dir) => fetch(server.baseUrl + '/v1/load_lora_adapter', {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ lora_name: name, lora_path: dir }) });
  const without = await startServer(['--enable-lora', '--max-lora-rank', '8']);
  try {
    const r = await load(without, 'x', experts);
    assert.equal(r.status, 400);
    assert.match(await r.text(), /mlp\.experts\.\d+\.\w+_proj\.weight' is a routed expert's weight: serve expert LoRA per request with --lora-experts/);
  } finally {
    await without.stop();
  }
  const s = await startServer(['--enable-lora', '--max-lora-rank', '8', '--lora-experts']);
  try {
    assert.equal((await load(s, 'x', experts)).status, 200);
    assert.equal((await load(s, 'p', plain)).status, 200);
    const info = await (await fetch(s.baseUrl + '/get_server_info')).json();
    assert.equal(info.lora_experts, true);
    const complete = async (model) => {
      const r = await fetch(s.baseUrl + '/v1/completions', { method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model, prompt: Array.from({ length: 12 }, (_, i) => 30 + i),
          max_tokens: 12, temperature: 0, ignore_eos: true, logprobs: 1 }) });
      assert.equal(r.status, 200);
      return (await r.json()).choices[0].logprobs.token_logprobs;
    };
    assert.notDeepEqual(await complete('x'), await complete('p'));
  } finally {
    await s.stop();
  }
});

// Two tensor-parallel ranks (--tp-size 2) with per-request LoRA (experts included), sleep mode and
// the hierarchical cache together: the adapter's tokens are one rank's, /get_server_info says so,
// and after SGLang's release / resume of every rank's memory the same tokens come back.
test('tensor-parallel ranks serve LoRA, sleep and the host tier together', async (t) => {
  const lora = tinyBeamLora(11, TINY_BEAM_EXPERT_MODULES);
  const flags = ['--lora-modules', `a=${lora}`, '--max-loras', '2', '--max-lora-rank', '8', '--lora-experts'];
  const one = await startServer(flags);
  let two;
  try {
    two = await startServer([...flags, '--tp-size', '2', '--enable-sleep-mode', '--enable-hierarchical-cache']);
  } catch (e) {  // on a GPU machine: two GPUs and NCCL are needed (the error says which is missing)
    await one.stop();
    if (/needs as many GPUs|NCCL/.test(String(e.message))) return t.skip(String(e.message).split('\n')[0]);
    throw e;
  }
  const ask = (s, model) => fetch(s.baseUrl + '/v1/completions', { method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, prompt: Array.from({ length: 12 }, (_, i) => 30 + i), max_tokens: 8,
      temperature: 0, ignore_eos: true }) }).then((r) => r.json()).then((j) => j.choices[0].text);
  const post = (route, body) => fetch(two.baseUrl + route, { method: 'POST',
    headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }).then((r) => r.json());
  try {
    const adapted = await ask(one, 'a');
    assert.notEqual(adapted, await ask(one, MODEL));
    assert.equal(await ask(two, 'a'), adapted);
    const info = await (await fetch(two.baseUrl + '/get_server_info')).json();
    assert.deepEqual([info.tp_size, info.enable_lora, info.enable_hierarchical_cache, info.enable_memory_saver],
      [2, true, true, true]);
    assert.equal((await post('/release_memory_occupation', {})).success, true);
    assert.equal((await post('/resume_memory_occupation', {})).success, true);
    assert.equal(await ask(two, 'a'), adapted);
  } finally {
    assert.equal(await two.stop(), 0);
    assert.equal(await one.stop(), 0);
    fs.rmSync(lora, { recursive: true, force: true });
  }
});

// Data parallelism (vLLM's --data-parallel-size, SGLang's --dp-size): two replicas answer what one
// engine answers, /get_server_info and /metrics show each, and a request may name its replica
// (vLLM's X-data-parallel-rank header, data_parallel_rank / SGLang's routed_dp_rank fields); a
// replica that does not exist is a 400 naming the field.
test('data-parallel replicas: the same answers, each replica shown, a replica by name', async (t) => {
  let dp;
  try {
    dp = await startServer(['--dp-size', '2', '--load-balance-method', 'round_robin']);
  } catch (e) {  // on a one-GPU machine
    if (/needs 2 GPUs/.test(String(e.message))) return t.skip(String(e.message).split('\n')[0]);
    throw e;
  }
  const complete = (s, extra = {}, headers = {}) => fetch(s.baseUrl + '/v1/completions', {
    method: 'POST', headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: MODEL, prompt: 'The weather in Paris', max_tokens: 6,
      temperature: 0, ...extra }) });
  try {
    const want = (await (await complete(server)).json()).choices[0].text;
    // Four at once: round robin puts two on each replica.
    const texts = await Promise.all([0, 1, 2, 3].map(async () =>
      (await (await complete(dp)).json()).choices[0].text));
    assert.deepEqual(texts, [want, want, want, want]);
    const info = await (await fetch(dp.baseUrl + '/get_server_info')).json();
    assert.deepEqual([info.dp_size, info.load_balance_method, info.internal_states.length],
      [2, 'round_robin', 2]);
    // SGLang's /get_load (its router polls it): one entry per replica.
    const load = await (await fetch(dp.baseUrl + '/get_load')).json();
    assert.deepEqual(load.map((l) => l.dp_rank), [0, 1]);
    for (const l of load)
      assert.deepEqual(Object.keys(l).sort(), ['dp_rank', 'num_reqs', 'num_tokens', 'num_waiting_reqs']);
    assert.equal((await (await fetch(server.baseUrl + '/get_load')).json()).length, 1);
    const m = await metrics(dp.baseUrl);
    assert.ok('beamserve_replica_requests_running{replica="1"}' in m, Object.keys(m).join(' '));
    assert.equal(m['beamserve_replica_kv_usage{replica="0"}'] >= 0, true);
    // By name: the header, the body's fields, SGLang's /generate.
    for (const [extra, headers] of [[{}, { 'X-data-parallel-rank': '1' }],
      [{ data_parallel_rank: 0 }, {}], [{ routed_dp_rank: 1 }, {}]]) {
      const r = await complete(dp, extra, headers);
      assert.equal(r.status, 200);
      assert.equal((await r.json()).choices[0].text, want);
    }
    const g = await fetch(dp.baseUrl + '/generate', { method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'The weather in Paris', routed_dp_rank: 1,
        sampling_params: { max_new_tokens: 6, temperature: 0 } }) });
    assert.equal(g.status, 200);
    assert.equal((await g.json()).text, want);
    for (const [extra, headers, param] of [[{}, { 'X-data-parallel-rank': '2' }, 'X-data-parallel-rank'],
      [{}, { 'X-data-parallel-rank': 'one' }, 'X-data-parallel-rank'],
      [{ data_parallel_rank: 2 }, {}, 'data_parallel_rank'],
      [{ data_parallel_rank: 0, routed_dp_rank: 1 }, {}, 'routed_dp_rank']]) {
      const r = await complete(dp, extra, headers);
      assert.equal(r.status, 400);
      const body = await r.json();
      assert.equal(body.error.param, param, JSON.stringify(body));
    }
    // A server of one replica takes rank 0 only.
    assert.equal((await complete(server, { data_parallel_rank: 0 })).status, 200);
    const refused = await (await complete(server, { data_parallel_rank: 1 })).json();
    assert.match(refused.error.message, /names no data-parallel replica: the server runs 1/);
  } finally {
    assert.equal(await dp.stop(), 0);
  }
  await assert.rejects(startServer(['--dp-size', '0']), /--dp-size must be in \[1, 64\], got 0/);
  await assert.rejects(startServer(['--dp-size', '2', '--data-parallel-size', '2']),
    /--data-parallel-size and --dp-size \(SGLang's name\) are one setting/);
  await assert.rejects(startServer(['--load-balance-method', 'power_of_two']),
    /--load-balance-method must be cache_aware, round_robin, shortest_queue or minimum_tokens, got 'power_of_two'/);
});

// Sleep mode (--enable-sleep-mode) for RL loops that train on the same GPU: vLLM's /sleep,
// /wake_up and /is_sleeping, SGLang's release / resume_memory_occupation. A request sent while
// asleep waits and then answers as before the sleep; level 2 serves again once new weights come
// through /update_weights_from_disk; bad levels, tags and a server without the flag are 400s.
test('sleep mode: /sleep and /wake_up give memory back; requests wait for the wake-up', async () => {
  const sleepy = await startServer(['--enable-sleep-mode', '--enable-weight-updates']);
  try {
    const call = async (method, route, body) => {
      const r = await fetch(sleepy.baseUrl + route, { method, headers: { 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
      return { status: r.status, json: await r.json() };
    };
    const ask = { model: MODEL, prompt: 'The weather in Paris', max_tokens: 6, temperature: 0 };
    const complete = async () => (await call('POST', '/v1/completions', ask)).json.choices[0].text;
    const awake = await complete();
    assert.deepEqual((await call('GET', '/is_sleeping')).json, { is_sleeping: false });
    assert.equal((await call('POST', '/sleep?level=1')).status, 200);
    assert.deepEqual((await call('GET', '/is_sleeping')).json, { is_sleeping: true });
    assert.match((await call('POST', '/sleep')).json.error.message, /already asleep/);
    assert.deepEqual((await call('GET', '/health')).json, { status: 'sleeping' });
    const probe = await call('GET', '/health_generate');
    assert.equal(probe.status, 503);
    assert.equal(probe.json.status, 'sleeping');
    let answered = false;
    const waiting = complete().then((text) => { answered = true; return text; });
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(answered, false);
    assert.equal((await call('POST', '/wake_up?tags=weights')).status, 200);
    assert.deepEqual((await call('GET', '/is_sleeping')).json, { is_sleeping: true });  // KV still out
    assert.equal((await call('POST', '/wake_up?tags=kv_cache')).status, 200);
    assert.equal(await waiting, awake);
    // Level 2 drops the GPU's weights: requests wait until new ones come (the CPU's weights are
    // host memory and stay).
    assert.equal((await call('POST', '/sleep?level=2')).status, 200);
    assert.equal((await call('POST', '/wake_up')).status, 200);
    const onGpu = process.env.BEAMSERVE_DEVICE === 'cuda';
    assert.deepEqual((await call('GET', '/is_sleeping')).json, { is_sleeping: onGpu });
    const update = await call('POST', '/update_weights_from_disk', { model_path: path.join(repoRoot, 'models/tiny-beam') });
    assert.equal(update.json.success, true, JSON.stringify(update.json));
    assert.deepEqual((await call('GET', '/is_sleeping')).json, { is_sleeping: false });
    assert.equal(await complete(), awake);
    // SGLang's names.
    const released = await call('POST', '/release_memory_occupation', {});
    assert.deepEqual(released.json, { success: true, message: 'Succeeded to release memory occupation.' });
    const resumed = await call('POST', '/resume_memory_occupation', { tags: ['weights', 'kv_cache'] });
    assert.equal(resumed.json.success, true);
    assert.equal(await complete(), awake);
    // One part at a time: the KV cache alone, then (GPU) the weights alone.
    assert.equal((await call('POST', '/release_memory_occupation', { tags: ['kv_cache'] })).json.success, true);
    assert.deepEqual((await call('GET', '/is_sleeping')).json, { is_sleeping: true });
    const weightsOnly = await call('POST', '/release_memory_occupation', { tags: ['weights'] });
    assert.equal(weightsOnly.json.success, onGpu, JSON.stringify(weightsOnly.json));
    if (!onGpu) assert.match(weightsOnly.json.message, /host memory/);
    assert.equal((await call('POST', '/resume_memory_occupation', { tags: ['kv_cache'] })).json.success, true);
    assert.deepEqual((await call('GET', '/is_sleeping')).json, { is_sleeping: onGpu });
    assert.equal((await call('POST', '/resume_memory_occupation', { tags: ['weights'] })).json.success, true);
    assert.equal(await complete(), awake);
    for (const [route, param] of [['/sleep?level=3', 'level'], ['/wake_up?tags=everything', 'tags']]) {
      const bad = await call('POST', route);
      assert.equal(bad.status, 400);
      assert.equal(bad.json.error.param, param);
    }
  } finally {
    assert.equal(await sleepy.stop(), 0);
  }
  const off = await post('/sleep', {});
  assert.equal(off.status, 400);
  assert.match(off.json.error.message, /--enable-sleep-mode/);
});

test('echo with max_tokens 0 returns the prompt alone; echo with n > 1 and streamed', async () => {
  const prompt = 'The weather in Paris';
  const r = await post('/v1/completions', { model: MODEL, prompt, max_tokens: 0, echo: true, logprobs: 2 });
  assert.equal(r.status, 200, r.text);
  const c = r.json.choices[0];
  assert.equal(c.text, prompt);
  assert.equal(c.finish_reason, 'length');
  assert.equal(r.json.usage.completion_tokens, 0);
  const tok = await post('/tokenize', { model: MODEL, prompt });
  assert.equal(c.logprobs.tokens.length, tok.json.count);
  assert.equal(c.logprobs.tokens.join(''), prompt);
  assert.ok(c.logprobs.top_logprobs.slice(1).every((t) => Object.keys(t).length === 2));
  // Without logprobs too; the prompt may be token ids (echoed detokenized).
  const plain = await post('/v1/completions', { model: MODEL, prompt: tok.json.tokens, max_tokens: 0, echo: true });
  assert.equal(plain.status, 200, plain.text);
  assert.equal(plain.json.choices[0].text, prompt);
  assert.equal(plain.json.choices[0].logprobs, null);
  // Streamed: the prompt comes first in each choice's first chunk, even with no output at all.
  const ev = await sseEvents('/v1/completions', { model: MODEL, prompt, max_tokens: 0, echo: true, n: 2, stream: true });
  for (const i of [0, 1]) {
    const mine = ev.filter((e) => e.choices[0]?.index === i);
    assert.equal(mine[0].choices[0].text, prompt);
    assert.equal(mine.map((e) => e.choices[0].text).join(''), prompt);
    assert.equal(mine.at(-1).choices[0].finish_reason, 'length');
  }
  // Echo with output, n = 2, streamed or not: text = prompt + output, the same both ways.
  const ask = { model: MODEL, prompt, max_tokens: 4, echo: true, n: 2, temperature: 0, ignore_eos: true, logprobs: 1,
    logit_bias: asciiOnly };
  const whole = await post('/v1/completions', ask);
  const streamed = await sseEvents('/v1/completions', { ...ask, stream: true });
  for (const i of [0, 1]) {
    const w = whole.json.choices[i];
    assert.ok(w.text.startsWith(prompt) && w.text.length > prompt.length);
    const mine = streamed.filter((e) => e.choices[0]?.index === i).map((e) => e.choices[0]);
    assert.equal(mine.map((x) => x.text).join(''), w.text);
    const lp = mine.flatMap((x) => x.logprobs?.token_logprobs ?? []);
    assert.deepEqual(lp, w.logprobs.token_logprobs);
    assert.deepEqual(mine.flatMap((x) => x.logprobs?.text_offset ?? []), w.logprobs.text_offset);
  }
});

test('completions: a list of prompts answers prompt-major choices, streamed or not', async () => {
  const prompts = ['Hello world', [Tok.HELLO, 40, 41], 'abc'];
  const ask = { model: MODEL, prompt: prompts, max_tokens: 3, n: 2, temperature: 0, ignore_eos: true, echo: true,
    logit_bias: asciiOnly };
  const r = await post('/v1/completions', ask);
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.json.choices.map((c) => c.index), [0, 1, 2, 3, 4, 5]);
  const counts = [];
  for (const p of prompts) {
    counts.push(typeof p === 'string' ? (await post('/tokenize', { model: MODEL, prompt: p })).json.count : p.length);
  }
  assert.equal(r.json.usage.prompt_tokens, counts.reduce((a, b) => a + b, 0));
  assert.equal(r.json.usage.completion_tokens, 6 * 3);
  const echoed = ['Hello world', 'Hello%&', 'abc'];
  r.json.choices.forEach((c, i) => assert.ok(c.text.startsWith(echoed[Math.floor(i / 2)]), c.text));
  // Greedy: both choices of a prompt agree, and each matches the prompt sent alone.
  for (let p = 0; p < 3; p++) {
    assert.equal(r.json.choices[2 * p].text, r.json.choices[2 * p + 1].text);
    const alone = await post('/v1/completions', { ...ask, prompt: prompts[p], n: 1 });
    assert.equal(alone.json.choices[0].text, r.json.choices[2 * p].text);
  }
  const ev = await sseEvents('/v1/completions', { ...ask, stream: true, stream_options: { include_usage: true } });
  for (let i = 0; i < 6; i++) {
    const mine = ev.filter((e) => e.choices[0]?.index === i).map((e) => e.choices[0]);
    assert.equal(mine.map((x) => x.text).join(''), r.json.choices[i].text);
    assert.equal(mine.at(-1).finish_reason, 'length');
  }
  assert.deepEqual(ev.at(-1).usage, r.json.usage);
  // A bad element names its index; a prompt past the context in a list is refused whole.
  const bad = await post('/v1/completions', { model: MODEL, prompt: ['ok', 7] });
  assertOpenAiError(bad, 400, 'prompt');
  assert.match(bad.json.error.message, /prompt\[1\]/);
  const long = await post('/v1/completions', { model: MODEL, prompt: ['ok', 'z9'.repeat(5000)], max_tokens: 1 });
  assertOpenAiError(long, 400);
  assert.equal(long.json.error.code, 'context_length_exceeded');
});

test("vLLM's prompt_logprobs on completions and chat: one entry per prompt token", async () => {
  const ids = [Tok.HELLO, 40, 41, 42];
  const r = await post('/v1/completions', { model: MODEL, prompt: ids, max_tokens: 1, prompt_logprobs: 3,
    temperature: 0, echo: true, logprobs: 1 });
  assert.equal(r.status, 200, r.text);
  const c = r.json.choices[0];
  const plp = c.prompt_logprobs;
  assert.equal(plp.length, ids.length);
  assert.equal(plp[0], null);
  for (let p = 1; p < ids.length; p++) {
    const entry = plp[p];
    const mine = entry[String(ids[p])];
    assert.ok(mine, `position ${p} holds its prompt token`);
    assert.equal(Object.keys(entry)[0], String(ids[p]));
    assert.equal(typeof mine.decoded_token, 'string');
    assert.ok(Number.isInteger(mine.rank) && mine.rank >= 1);
    assert.ok(near(mine.logprob, c.logprobs.token_logprobs[p], 1e-6));  // the echo's number
    const others = Object.entries(entry).filter(([k]) => k !== String(ids[p]));
    assert.equal(Object.keys(entry).length, mine.rank <= 3 ? 3 : 4);
    const ranks = Object.values(entry).map((v) => v.rank).sort((a, b) => a - b);
    if (mine.rank > 3) assert.deepEqual(ranks, [1, 2, 3, mine.rank]);
    else assert.deepEqual(ranks, [1, 2, 3]);
    for (const [, v] of others) assert.ok(v.logprob >= mine.logprob || v.rank < mine.rank);
  }
  // Without echo the text is only the output; prompt_logprobs 0: the prompt token alone.
  const zero = await post('/v1/completions', { model: MODEL, prompt: ids, max_tokens: 0, prompt_logprobs: 0,
    temperature: 0 });
  assert.equal(zero.status, 200, zero.text);
  assert.equal(zero.json.choices[0].text, '');
  zero.json.choices[0].prompt_logprobs.slice(1).forEach((e, i) => {
    assert.deepEqual(Object.keys(e), [String(ids[i + 1])]);
    assert.ok(near(e[String(ids[i + 1])].logprob, plp[i + 1][String(ids[i + 1])].logprob, 1e-6));
  });
  // Chat: top-level prompt_logprobs over the rendered prompt's tokens.
  const messages = [{ role: 'user', content: 'hi there' }];
  const chatTok = await post('/tokenize', { model: MODEL, messages });
  const ch = await post('/v1/chat/completions', { model: MODEL, messages, max_tokens: 2, prompt_logprobs: 1, n: 2,
    temperature: 1, seed: 5 });
  assert.equal(ch.status, 200, ch.text);
  assert.equal(ch.json.prompt_logprobs.length, ch.json.usage.prompt_tokens);
  assert.equal(ch.json.prompt_logprobs[0], null);
  ch.json.prompt_logprobs.slice(1).forEach((e, i) => assert.ok(e[String(chatTok.json.tokens[i + 1])]));
  assert.equal(ch.json.choices[0].prompt_logprobs, undefined);
  // The rendered chat prompt scored as a completion prompt gives the same numbers.
  const asText = await post('/v1/completions', { model: MODEL, prompt: chatTok.json.tokens, max_tokens: 0,
    prompt_logprobs: 1, temperature: 1 });
  assert.deepEqual(Object.keys(asText.json.choices[0].prompt_logprobs[3]), Object.keys(ch.json.prompt_logprobs[3]));
  const key = String(chatTok.json.tokens[3]);
  assert.ok(near(asText.json.choices[0].prompt_logprobs[3][key].logprob, ch.json.prompt_logprobs[3][key].logprob));
  const scoreOnly = await post('/v1/chat/completions', { model: MODEL, messages, max_tokens: 0, prompt_logprobs: 0 });
  assert.equal(scoreOnly.status, 200, scoreOnly.text);
  assert.equal(scoreOnly.json.choices[0].finish_reason, 'length');
  assert.equal(scoreOnly.json.choices[0].message.content, '');
});

test('/generate: prompt_logprobs from logprob_start_len, streamed on the first chunk', async () => {
  const ids = [Tok.HELLO, 40, 41, 42, 43, 44];
  const base = { input_ids: ids, max_tokens: 2, temperature: 0, ignore_eos: true };
  const all = await post('/generate', { ...base, prompt_logprobs: 2 });
  assert.equal(all.status, 200, all.text);
  const plp = all.json.choices[0].prompt_logprobs;
  assert.equal(plp.length, ids.length);
  assert.equal(plp[0], null);
  plp.slice(1).forEach((e, i) => {
    assert.equal(e.token_id, ids[i + 1]);
    assert.equal(e.top_logprobs.length, 2);
    assert.ok(e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob);
    assert.ok(e.rank >= 1 && e.logprob <= e.top_logprobs[0].logprob);
    if (e.rank === 1) assert.equal(e.top_logprobs[0].token_id, e.token_id);
    else assert.ok(e.rank > 2 || e.top_logprobs[1].token_id === e.token_id);
  });
  // true = no alternatives; logprob_start_len cuts the list from that position.
  const tail = await post('/generate', { ...base, prompt_logprobs: true, logprob_start_len: 3 });
  const t = tail.json.choices[0].prompt_logprobs;
  assert.equal(t.length, ids.length - 3);
  t.forEach((e, i) => {
    assert.equal(e.token_id, ids[i + 3]);
    assert.deepEqual(e.top_logprobs, []);
    assert.ok(near(e.logprob, plp[i + 3].logprob, 1e-6));
    assert.equal(e.rank, plp[i + 3].rank);
  });
  assert.deepEqual(tail.json.choices[0].token_ids, all.json.choices[0].token_ids);
  // The output logprobs of the greedy tokens equal their logprobs scored as prompt tokens.
  const out = await post('/generate', { ...base, logprobs: true });
  const scored = await post('/generate', { input_ids: [...ids, ...out.json.choices[0].token_ids], max_tokens: 0,
    prompt_logprobs: true, logprob_start_len: ids.length, temperature: 0 });
  assert.equal(scored.status, 200, scored.text);
  assert.equal(scored.json.choices[0].finish_reason, 'length');
  assert.deepEqual(scored.json.choices[0].token_ids, []);
  scored.json.choices[0].prompt_logprobs.forEach((e, i) =>
    assert.ok(near(e.logprob, out.json.choices[0].logprobs[i].logprob, PREFILL_VS_DECODE)));
  // Streaming: each choice's first chunk carries the list.
  const ev = await sseEvents('/generate', { ...base, prompt_logprobs: 2, n: 2, stream: true });
  for (const i of [0, 1]) {
    const mine = ev.filter((e) => e.index === i);
    assert.deepEqual(mine[0].prompt_logprobs, plp);
    assert.ok(mine.slice(1).every((e) => e.prompt_logprobs === undefined));
  }
  const scoreStream = await sseEvents('/generate', { input_ids: ids, max_tokens: 0, prompt_logprobs: 2, stream: true,
    temperature: 0 });
  assert.deepEqual(scoreStream[0].prompt_logprobs, plp);
  assert.equal(scoreStream.find((e) => e.finish_reason).finish_reason, 'length');
});

test('prompt logprobs: bad values are 400s naming the field', async () => {
  const cmpl = (extra) => post('/v1/completions', { model: MODEL, prompt: 'hello', ...extra });
  assertOpenAiError(await cmpl({ prompt_logprobs: 21 }), 400, 'prompt_logprobs');
  assertOpenAiError(await cmpl({ prompt_logprobs: -1 }), 400, 'prompt_logprobs');
  assertOpenAiError(await cmpl({ prompt_logprobs: 'two' }), 400, 'prompt_logprobs');
  assertOpenAiError(await cmpl({ max_tokens: 0 }), 400, 'max_tokens');
  assertOpenAiError(await cmpl({ max_tokens: -1, echo: true }), 400, 'max_tokens');
  assertOpenAiError(await cmpl({ echo: true, suffix: '!' }), 400, 'suffix');
  assertOpenAiError(await cmpl({ echo: 1 }), 400, 'echo');
  assertOpenAiError(await cmpl({ echo: true, logprobs: 21 }), 400, 'logprobs');
  assertOpenAiError(await cmpl({ prompt: [99999], echo: true }), 400, 'prompt');
  const ok = await cmpl({ echo: true, n: 3, max_tokens: 1 });
  assert.equal(ok.status, 200, ok.text);
  assert.equal(ok.json.choices.length, 3);
  const chatPl = (extra) => post('/v1/chat/completions', chat(extra));
  assertOpenAiError(await chatPl({ prompt_logprobs: 1, stream: true }), 400, 'prompt_logprobs');
  assertOpenAiError(await chatPl({ prompt_logprobs: 0, stream: true }), 400, 'prompt_logprobs');
  assertOpenAiError(await chatPl({ prompt_logprobs: 30 }), 400, 'prompt_logprobs');
  assertOpenAiError(await chatPl({ max_tokens: 0 }), 400, 'max_tokens');
  const gen = (extra) => post('/generate', { input_ids: [Tok.HELLO, 40, 41, 42], max_tokens: 1, ...extra });
  assertOpenAiError(await gen({ prompt_logprobs: 25 }), 400, 'prompt_logprobs');
  assertOpenAiError(await gen({ prompt_logprobs: 'yes' }), 400, 'prompt_logprobs');
  assertOpenAiError(await gen({ prompt_logprobs: true, logprob_start_len: 4 }), 400, 'logprob_start_len');
  assertOpenAiError(await gen({ prompt_logprobs: true, logprob_start_len: -2 }), 400, 'logprob_start_len');
  assertOpenAiError(await gen({ logprob_start_len: 1 }), 400, 'logprob_start_len');
  assertOpenAiError(await gen({ max_tokens: 0 }), 400, 'max_tokens');
  const none = await gen({ logprob_start_len: -1 });  // SGLang's default: no prompt logprobs
  assert.equal(none.status, 200, none.text);
  assert.equal(none.json.choices[0].prompt_logprobs, undefined);
  assert.equal((await fetch(server.baseUrl + '/health')).status, 200);
});

// SGLang's /generate format (what verl, slime, AReaL and OpenRLHF send): the same engine output
// as the native format, in SGLang's shapes.
const SGL_IDS = [Tok.HELLO, 40, 41, 42, 43, 44];
const sgl = (extra) => post('/generate', { input_ids: SGL_IDS, ...extra });

test('/generate, SGLang format: a verl-style request equals the native greedy output', async () => {
  const native = await post('/generate', { input_ids: SGL_IDS, max_tokens: 8, temperature: 0, ignore_eos: true,
    logprobs: true });
  const c = native.json.choices[0];
  const r = await sgl({ sampling_params: { max_new_tokens: 8, temperature: 0, ignore_eos: true },
    return_logprob: true, rid: 'verl-1' });
  assert.equal(r.status, 200, r.text);
  assert.ok(!Array.isArray(r.json));
  assert.deepEqual(Object.keys(r.json), ['text', 'output_ids', 'meta_info']);
  assert.deepEqual(r.json.output_ids, c.token_ids);
  assert.equal(r.json.text, c.text);
  const m = r.json.meta_info;
  assert.equal(m.id, 'verl-1');
  assert.deepEqual(m.finish_reason, { type: 'length', length: 8 });
  assert.equal(m.prompt_tokens, SGL_IDS.length);
  assert.equal(m.completion_tokens, 8);
  assert.equal(typeof m.cached_tokens, 'number');
  assert.ok(m.e2e_latency > 0);
  // SGLang's timing fields (verl logs them): the instants in order, the spans between them.
  const now = Date.now() / 1000;
  assert.ok(m.request_received_ts > now - 60 && m.request_received_ts <= m.forward_entry_time);
  assert.ok(m.forward_entry_time <= m.prefill_finished_time);
  assert.ok(m.prefill_finished_time <= m.request_finished_ts && m.request_finished_ts <= now + 1);
  assert.ok(m.queue_time >= 0 && m.prefill_launch_latency >= 0 && m.inference_time > 0);
  assert.ok(m.inference_time <= m.e2e_latency && m.decode_throughput > 0);
  assert.equal(m.output_token_logprobs.length, 8);
  m.output_token_logprobs.forEach(([lp, id, text], i) => {
    assert.equal(id, c.token_ids[i]);
    assert.equal(lp, c.logprobs[i].logprob);
    assert.equal(text, null);  // return_text_in_logprobs is off
  });
  // logprob_start_len -1 (the default): the last prompt position alone, its logprob null.
  assert.deepEqual(m.input_token_logprobs, [[null, SGL_IDS.at(-1), null]]);
  assert.equal(m.input_top_logprobs, undefined);
  // Without return_logprob no logprob keys; max_new_tokens defaults to 128 (ignore_eos keeps going).
  const plain = await sgl({ sampling_params: { temperature: 0, ignore_eos: true } });
  assert.equal(plain.json.meta_info.completion_tokens, 128);
  assert.deepEqual(plain.json.output_ids.slice(0, 8), c.token_ids);
  assert.equal(plain.json.meta_info.output_token_logprobs, undefined);
});

// return_entropy (RL trainers' entropy terms): each output token's entropy of the distribution its
// logprobs describe, at least the part its top 20 alternatives make up; natively per choice (and
// per streamed chunk), in SGLang's meta_info as output_token_entropy.
test('/generate: return_entropy gives every output token its entropy, native and SGLang formats', async () => {
  const body = { input_ids: SGL_IDS, max_tokens: 6, temperature: 0.8, seed: 5, ignore_eos: true };
  const native = await post('/generate', { ...body, logprobs: true, top_logprobs: 20, return_entropy: true });
  assert.equal(native.status, 200, native.text);
  const c = native.json.choices[0];
  assert.equal(c.entropy.length, c.token_ids.length);
  c.entropy.forEach((h, i) => {
    const top = c.logprobs[i].top_logprobs.reduce((sum, e) => sum - Math.exp(e.logprob) * e.logprob, 0);
    assert.ok(h >= top - 1e-4 && h > 0, `entropy ${h} below its top 20's ${top}`);
  });
  const plain = await post('/generate', body);
  assert.equal(plain.json.choices[0].entropy, undefined);
  assert.deepEqual(plain.json.choices[0].token_ids, c.token_ids);
  const ev = await sseEvents('/generate', { ...body, return_entropy: true, stream: true });
  assert.deepEqual(ev.filter((e) => e.entropy).flatMap((e) => e.entropy), c.entropy);
  const r = await sgl({ sampling_params: { max_new_tokens: 6, temperature: 0.8, sampling_seed: 5, ignore_eos: true },
    return_entropy: true });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.json.output_ids, c.token_ids);
  assert.deepEqual(r.json.meta_info.output_token_entropy, c.entropy);
  assert.equal((await sgl({ sampling_params: { max_new_tokens: 2 } })).json.meta_info.output_token_entropy,
    undefined);
  assertOpenAiError(await sgl({ return_entropy: 'yes' }), 400, 'return_entropy');
  assertOpenAiError(await post('/generate', { ...body, return_entropy: 1 }), 400, 'return_entropy');
});

// token_ids_logprob (SGLang's; e.g. P("yes") for a generative reward): with return_logprob each
// output token and each prompt position from logprob_start_len gets the given ids' [logprob, id,
// text] triples in their order; an id the token was equals that token's own logprob.
test('/generate, SGLang format: token_ids_logprob gives each output and input position the ids\' logprobs', async () => {
  const sp = { max_new_tokens: 4, temperature: 0, ignore_eos: true };
  const first = await sgl({ sampling_params: sp, return_logprob: true });
  const ids = first.json.output_ids;
  const r = await sgl({ sampling_params: sp, return_logprob: true, token_ids_logprob: [ids[0], 40] });
  assert.equal(r.status, 200, r.text);
  const m = r.json.meta_info;
  assert.equal(m.output_token_ids_logprobs.length, ids.length);
  m.output_token_ids_logprobs.forEach((triples, i) => {
    assert.deepEqual(triples.map((t) => t[1]), [ids[0], 40]);
    triples.forEach(([lp]) => assert.ok(lp <= 0));
  });
  assert.equal(m.output_token_ids_logprobs[0][0][0], m.output_token_logprobs[0][0]);
  // The native format: each choice's token_ids_logprobs, the same values.
  const native = await post('/generate', { input_ids: SGL_IDS, max_tokens: 4, temperature: 0, ignore_eos: true,
    token_ids_logprob: [ids[0], 40] });
  assert.equal(native.status, 200, native.text);
  assert.deepEqual(native.json.choices[0].token_ids_logprobs,
    m.output_token_ids_logprobs.map((t) => t.map(([logprob, token_id]) => ({ token_id, logprob }))));
  assertOpenAiError(await post('/generate', { input_ids: SGL_IDS, token_ids_logprob: [-1] }), 400,
    'token_ids_logprob');
  // The default logprob_start_len (-1): the last prompt position alone, null as SGLang pads it.
  assert.deepEqual(m.input_token_ids_logprobs, [null]);
  // From position 0: every prompt position but the first gets the ids' triples; an id equal to
  // the position's prompt token has that token's input logprob.
  const inp = await sgl({ sampling_params: { max_new_tokens: 1 }, return_logprob: true, logprob_start_len: 0,
    token_ids_logprob: [SGL_IDS[2], 40] });
  assert.equal(inp.status, 200, inp.text);
  const im = inp.json.meta_info;
  assert.equal(im.input_token_ids_logprobs.length, SGL_IDS.length);
  assert.equal(im.input_token_ids_logprobs[0], null);
  im.input_token_ids_logprobs.slice(1).forEach((t) => assert.deepEqual(t.map((e) => e[1]), [SGL_IDS[2], 40]));
  assert.equal(im.input_token_ids_logprobs[2][0][0], im.input_token_logprobs[2][0]);
  assert.equal(im.input_token_ids_logprobs[1][1][0], im.input_token_logprobs[1][0]);  // SGL_IDS[1] is 40
  // Without return_logprob (as SGLang) or without the field: no key.
  assert.equal((await sgl({ sampling_params: sp, token_ids_logprob: [40] })).json.meta_info.output_token_ids_logprobs,
    undefined);
  assert.equal(m.output_token_entropy, undefined);
  assertOpenAiError(await sgl({ return_logprob: true, token_ids_logprob: ['a'] }), 400, 'token_ids_logprob');
  assertOpenAiError(await sgl({ return_logprob: true, token_ids_logprob: [1 << 30] }), 400, 'token_ids_logprob');
});

test('/generate, SGLang format: input logprobs from logprob_start_len equal the native prompt_logprobs', async () => {
  const native = await post('/generate', { input_ids: SGL_IDS, max_tokens: 2, temperature: 0, ignore_eos: true,
    prompt_logprobs: 2, logprobs: true, top_logprobs: 2 });
  const plp = native.json.choices[0].prompt_logprobs;
  const r = await sgl({ sampling_params: { max_new_tokens: 2, temperature: 0, ignore_eos: true },
    return_logprob: true, logprob_start_len: 0, top_logprobs_num: 2, return_text_in_logprobs: true });
  assert.equal(r.status, 200, r.text);
  const m = r.json.meta_info;
  assert.equal(m.input_token_logprobs.length, SGL_IDS.length);
  assert.deepEqual(m.input_token_logprobs[0], [null, Tok.HELLO, 'Hello']);
  assert.equal(m.input_top_logprobs[0], null);
  for (let p = 1; p < SGL_IDS.length; p++) {
    const [lp, id, text] = m.input_token_logprobs[p];
    assert.equal(id, SGL_IDS[p]);
    assert.equal(lp, plp[p].logprob);
    assert.equal(typeof text, 'string');
    assert.deepEqual(m.input_top_logprobs[p].map((t) => [t[0], t[1]]),
      plp[p].top_logprobs.map((t) => [t.logprob, t.token_id]));
  }
  assert.deepEqual(m.output_top_logprobs.map((top) => top.map((t) => t[1])),
    native.json.choices[0].logprobs.map((e) => e.top_logprobs.map((t) => t.token_id)));
  // From position 3: that position is null too (SGLang pads the first entry), the rest as above.
  const tail = await sgl({ sampling_params: { max_new_tokens: 1, temperature: 0 }, return_logprob: true,
    logprob_start_len: 3 });
  assert.deepEqual(tail.json.meta_info.input_token_logprobs,
    [[null, SGL_IDS[3], null], ...SGL_IDS.slice(4).map((id, i) => [plp[i + 4].logprob, id, null])]);
  // max_new_tokens 0 scores the prompt only.
  const score = await sgl({ sampling_params: { max_new_tokens: 0, temperature: 0 }, return_logprob: true, logprob_start_len: 0 });
  assert.equal(score.status, 200, score.text);
  assert.deepEqual(score.json.output_ids, []);
  assert.deepEqual(score.json.meta_info.finish_reason, { type: 'length', length: 0 });
  assert.equal(score.json.meta_info.input_token_logprobs[2][0], plp[2].logprob);
});

test('/generate, SGLang format: batches, text input and n > 1 answer lists', async () => {
  const second = [Tok.HELLO, 50, 51];
  const one = async (ids) => (await post('/generate', { input_ids: ids, max_tokens: 3, temperature: 0,
    ignore_eos: true })).json.choices[0].token_ids;
  const b = await post('/generate', { input_ids: [SGL_IDS, second], rid: ['a', 'b'],
    sampling_params: { max_new_tokens: 3, temperature: 0, ignore_eos: true } });
  assert.equal(b.status, 200, b.text);
  assert.ok(Array.isArray(b.json));
  assert.equal(b.json.length, 2);
  assert.deepEqual(b.json.map((o) => o.meta_info.id), ['a', 'b']);
  assert.deepEqual(b.json[0].output_ids, await one(SGL_IDS));
  assert.deepEqual(b.json[1].output_ids, await one(second));
  assert.deepEqual(b.json.map((o) => o.meta_info.prompt_tokens), [SGL_IDS.length, 3]);
  // Text: tokenized as /tokenize does, the same output as its ids.
  const tok = (await post('/tokenize', { prompt: 'Hello world' })).json.tokens;
  const t = await post('/generate', { text: 'Hello world', sampling_params: { max_new_tokens: 3, temperature: 0,
    ignore_eos: true } });
  assert.equal(t.status, 200, t.text);
  assert.equal(t.json.meta_info.prompt_tokens, tok.length);
  assert.deepEqual(t.json.output_ids, await one(tok));
  const tb = await post('/generate', { text: ['Hello world', 'Hello'], sampling_params: { max_new_tokens: 2 } });
  assert.equal(tb.json.length, 2);
  // n = 2 for two prompts: prompt-major, each sample its own id; seeded samples are reproducible.
  const n2 = { input_ids: [SGL_IDS, second], sampling_params: { max_new_tokens: 4, temperature: 1, n: 2,
    sampling_seed: 5, ignore_eos: true }, return_logprob: true };
  const n = await post('/generate', n2);
  assert.equal(n.status, 200, n.text);
  assert.equal(n.json.length, 4);
  assert.deepEqual(n.json.map((o) => o.meta_info.prompt_tokens), [SGL_IDS.length, SGL_IDS.length, 3, 3]);
  assert.equal(new Set(n.json.map((o) => o.meta_info.id)).size, 4);
  n.json.forEach((o) => assert.deepEqual(o.meta_info.output_token_logprobs.map((e) => e[1]), o.output_ids));
  const again = await post('/generate', n2);
  assert.deepEqual(again.json.map((o) => o.output_ids), n.json.map((o) => o.output_ids));
  const single = await sgl({ sampling_params: { max_new_tokens: 2, n: 2 } });
  assert.ok(Array.isArray(single.json));
  assert.equal(single.json.length, 2);
});

test('/generate, SGLang format: stop strings and stop ids in finish_reason.matched', async () => {
  const base = { input_ids: SGL_IDS, sampling_params: { max_new_tokens: 12, temperature: 0, ignore_eos: true,
    logit_bias: asciiOnly } };
  const full = (await post('/generate', base)).json;
  // A stop string: the text of an output token after the first.
  const texts = await Promise.all(full.output_ids.map(async (id) =>
    (await post('/detokenize', { tokens: [id] })).json.prompt));
  const k = texts.findIndex((s, i) => i > 0 && /^[\x21-\x7e]+$/.test(s));
  assert.ok(k > 0, JSON.stringify(texts));
  const stop = texts[k];
  const r = await post('/generate', { ...base, sampling_params: { ...base.sampling_params, stop } });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.json.meta_info.finish_reason, { type: 'stop', matched: stop });
  assert.equal(r.json.text, full.text.slice(0, full.text.indexOf(stop)));
  // no_stop_trim keeps the stop string in the text.
  const kept = await post('/generate', { ...base, sampling_params: { ...base.sampling_params, stop: [stop],
    no_stop_trim: true } });
  assert.equal(kept.json.text, full.text.slice(0, full.text.indexOf(stop) + stop.length));
  // A stop id: matched is the id, which ends output_ids.
  const id = full.output_ids[2];
  const s = await post('/generate', { ...base, sampling_params: { ...base.sampling_params, stop_token_ids: [id] } });
  assert.deepEqual(s.json.meta_info.finish_reason, { type: 'stop', matched: id });
  assert.deepEqual(s.json.output_ids, full.output_ids.slice(0, full.output_ids.indexOf(id) + 1));
  // stop_regex: the first match ends the output, trimmed from its start; matched is the pattern.
  const pattern = `(${stop.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&')})+`;
  const rx = await post('/generate', { ...base, sampling_params: { ...base.sampling_params, stop_regex: [pattern] } });
  assert.equal(rx.status, 200, rx.text);
  assert.deepEqual(rx.json.meta_info.finish_reason, { type: 'stop', matched: pattern });
  assert.equal(rx.json.text, r.json.text);
  const rxKept = await post('/generate', { ...base, sampling_params: { ...base.sampling_params, stop_regex: pattern,
    no_stop_trim: true } });
  assert.equal(rxKept.json.text, kept.json.text);
});

test('/generate, SGLang format: streams carry the cumulative output and end with [DONE]', async () => {
  const body = { input_ids: SGL_IDS, sampling_params: { max_new_tokens: 6, temperature: 0, ignore_eos: true },
    return_logprob: true };
  const whole = (await post('/generate', body)).json;
  const ev = await sseEvents('/generate', { ...body, stream: true });
  assert.ok(ev.length >= 2);
  for (let i = 1; i < ev.length; i++) {
    assert.ok(ev[i].output_ids.length >= ev[i - 1].output_ids.length);
    assert.deepEqual(ev[i].output_ids.slice(0, ev[i - 1].output_ids.length), ev[i - 1].output_ids);
    assert.ok(ev[i].text.startsWith(ev[i - 1].text));
  }
  ev.slice(0, -1).forEach((e) => assert.equal(e.meta_info.finish_reason, null));
  const last = ev.at(-1);
  assert.deepEqual(last.output_ids, whole.output_ids);
  assert.equal(last.text, whole.text);
  assert.deepEqual(last.meta_info.finish_reason, { type: 'length', length: 6 });
  assert.deepEqual(last.meta_info.output_token_logprobs, whole.meta_info.output_token_logprobs);
  assert.equal(last.index, undefined);
  // A batch's events carry each sample's index.
  const bev = await sseEvents('/generate', { input_ids: [SGL_IDS, [Tok.HELLO, 7]], stream: true,
    sampling_params: { max_new_tokens: 3, temperature: 0, ignore_eos: true } });
  for (const i of [0, 1]) {
    const mine = bev.filter((e) => e.index === i);
    assert.deepEqual(mine.at(-1).meta_info.finish_reason, { type: 'length', length: 3 });
    assert.equal(mine.at(-1).output_ids.length, 3);
  }
});

test('/generate, SGLang format: sampling_params.ebnf constrains each sample', async () => {
  const r = await sgl({ sampling_params: { ebnf: 'root ::= ("yes" | "no") " " [0-9]{1,3}',
    max_new_tokens: 20, temperature: 1, sampling_seed: 8, n: 3 } });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.length, 3);
  for (const o of r.json) {
    assert.equal(o.meta_info.finish_reason.type, 'stop', JSON.stringify(o));
    assert.match(o.text, /^(yes|no) [0-9]{1,3}$/);
  }
  // A recursive grammar: balanced parentheses around x.
  const nested = await sgl({ sampling_params: { ebnf: 'root ::= "(" root ")" | "x"',
    max_new_tokens: 60, temperature: 1, sampling_seed: 9 } });
  assert.equal(nested.status, 200, nested.text);
  assert.equal(nested.json.meta_info.finish_reason.type, 'stop', nested.text);
  assert.match(nested.json.text, /^\(*x\)*$/);
  assert.equal(nested.json.text.length, 2 * nested.json.text.indexOf('x') + 1, nested.json.text);
  // One format per request: regex and ebnf together name the second.
  assertOpenAiError(await sgl({ sampling_params: { regex: 'a', ebnf: 'root ::= "a"' } }), 400,
    'sampling_params.ebnf');
});

test('/generate, SGLang format: sampling_params.structural_tag constrains each sample', async () => {
  // The legacy shape SGLang sends as text: free text, and after each trigger a call whose
  // arguments are JSON of the schema; '<' (id 63) is pushed so calls happen.
  const tag = JSON.stringify({
    structures: [{ begin: '<n>', schema: { type: 'integer', minimum: 1, maximum: 9 }, end: '</n>' }],
    triggers: ['<'],
  });
  const r = await sgl({ sampling_params: { structural_tag: tag, max_new_tokens: 40, temperature: 1,
    sampling_seed: 3, n: 3, logit_bias: { 63: 25 } } });
  assert.equal(r.status, 200, r.text);
  let calls = 0;
  for (const o of r.json) {
    const rest = o.text.replace(/<n>([1-9])<\/n>/g, () => { ++calls; return ''; });
    if (o.meta_info.finish_reason.type === 'stop') assert.ok(!rest.includes('<'), o.text);
  }
  assert.ok(calls >= 1, r.text);
  assertOpenAiError(await sgl({ sampling_params: { structural_tag: '{"triggers": ["<"]}' } }), 400,
    'sampling_params.structural_tag');
});

// SGLang's /abort_request: a request named by its rid (or every request, abort_all) ends at once
// and answers what it generated so far, finish reason abort; its KV is freed.
test('/abort_request ends a request by its rid, or all of them', async () => {
  const long = (rid) => sgl({ sampling_params: { max_new_tokens: 3000, temperature: 0, ignore_eos: true }, rid });
  const abort = (body) => post('/abort_request', body);
  // Aborts until every answer came (a request may not have reached the engine yet); the counts.
  const abortUntilAnswered = async (answers, body) => {
    let pending = answers.length;
    answers.forEach((p) => p.then(() => { --pending; }));
    const counts = [];
    while (pending > 0) {
      const r = await abort(body);
      assert.equal(r.status, 200, r.text);
      counts.push(r.json.aborted);
      await new Promise((done) => setTimeout(done, 10));
    }
    return { answers: await Promise.all(answers), counts };
  };
  const one = await abortUntilAnswered([long('to-abort')], { rid: 'to-abort' });
  assert.equal(one.counts.filter((c) => c > 0)[0], 1);
  const r = one.answers[0];
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.meta_info.finish_reason.type, 'abort', r.text);
  assert.ok(r.json.output_ids.length < 3000);
  const both = await abortUntilAnswered([long('a'), long('b')], { abort_all: true });
  for (const x of both.answers) assert.equal(x.json.meta_info.finish_reason.type, 'abort', x.text);
  assert.equal((await abort({ rid: 'nobody' })).json.aborted, 0);
  assertOpenAiError(await abort({}), 400, 'rid');
  assertOpenAiError(await abort({ rid: 7 }), 400, 'rid');
});

// Aborts reach requests that are more than one engine request: a beam search answers its beams
// so far, each with finish_reason "abort" (n choices still); an embeddings request whose prompt
// never ran is a 503 that says it was aborted (not a 500); a response's status is "cancelled"; an
// Anthropic message is an error (503, or an error event once streaming), never end_turn.
test('/abort_request ends beam searches, embeddings, responses and messages with clear answers', async () => {
  const call = (route, body) => post(route, body);
  assert.equal((await call('/pause_generation', { mode: 'in_place' })).status, 200);
  try {
    const prompt = [Tok.HELLO, 40, 41, 42, 43];
    let pending = 4;
    const answers = [
      call('/v1/completions', { model: MODEL, prompt, max_tokens: 6, n: 3, use_beam_search: true,
        ignore_eos: true }),
      call('/v1/embeddings', { model: MODEL, input: [prompt] }),
      call('/v1/responses', { model: MODEL, input: 'hi', max_output_tokens: 8 }),
      call('/v1/messages', { model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }),
    ].map((p) => p.finally(() => { --pending; }));
    while (pending > 0) {  // (a request may not have reached the engine yet)
      assert.equal((await call('/abort_request', { abort_all: true })).status, 200);
      await new Promise((done) => setTimeout(done, 10));
    }
    const [beams, embedded, response, message] = await Promise.all(answers);
    assert.equal(beams.status, 200, beams.text);
    assert.equal(beams.json.choices.length, 3);
    for (const c of beams.json.choices) assert.equal(c.finish_reason, 'abort', beams.text);
    assertOpenAiError(embedded, 503);
    assert.match(embedded.json.error.message, /aborted before input 0's prompt ran/);
    assert.equal(response.status, 200, response.text);
    assert.equal(response.json.status, 'cancelled', response.text);
    assert.equal(message.status, 503, message.text);  // Anthropic's API has no stop reason for it
    assert.equal(message.json.error.type, 'overloaded_error');
    assert.match(message.json.error.message, /aborted before it finished/);
  } finally {
    assert.equal((await call('/continue_generation', {})).status, 200);
  }
});

test('/generate, SGLang format: what it cannot honour is a 400 naming the field', async () => {
  assertOpenAiError(await sgl({ sampling_params: {}, lora_path: 'my-adapter' }), 404, 'lora_path');
  assertOpenAiError(await sgl({ sampling_params: {}, lora_path: 7 }), 400, 'lora_path');
  assertOpenAiError(await sgl({ sampling_params: {}, image_data: 'cat.png' }), 400, 'image_data');
  assertOpenAiError(await sgl({ sampling_params: {}, custom_logit_processor: 'x' }), 400, 'custom_logit_processor');
  assertOpenAiError(await sgl({ sampling_params: { structural_tag: '{}' } }), 400,
    'sampling_params.structural_tag');
  assertOpenAiError(await sgl({ sampling_params: { stop_regex: 'a*' } }), 400,
    'sampling_params.stop_regex');  // matches the empty text
  assertOpenAiError(await sgl({ sampling_params: { stop_regex: ['x', '(a'] } }), 400,
    'sampling_params.stop_regex');
  const badGrammar = await sgl({ sampling_params: { ebnf: 'root ::= ("a"' } });
  assertOpenAiError(badGrammar, 400, 'sampling_params.ebnf');
  assert.match(badGrammar.json.error.message, /cannot be enforced/);
  assertOpenAiError(await sgl({ sampling_params: { max_tokens: 3 } }), 400, 'sampling_params.max_tokens');
  assertOpenAiError(await sgl({ sampling_params: { temperature: -1 } }), 400, 'sampling_params.temperature');
  assertOpenAiError(await sgl({ sampling_params: { top_p: 7 } }), 400, 'sampling_params.top_p');
  assertOpenAiError(await sgl({ return_logprob: true, logprob_start_len: SGL_IDS.length }), 400, 'logprob_start_len');
  assertOpenAiError(await sgl({ return_logprob: true, top_logprobs_num: 50 }), 400, 'top_logprobs_num');
  assertOpenAiError(await sgl({ text: 'hi' }), 400);  // both text and input_ids
  assertOpenAiError(await post('/generate', { text: 'hi', sampling_params: {}, model: 'other' }), 404, 'model');
  assertOpenAiError(await post('/generate', { sampling_params: {} }), 400, 'text');
  // Unset fields and result-neutral ones are fine.
  const ok = await sgl({ sampling_params: { max_new_tokens: 1 }, lora_path: null, log_metrics: false });
  assert.equal(ok.status, 200, ok.text);
  assert.equal((await fetch(server.baseUrl + '/health')).status, 200);
});

// Pausing generation for RL weight syncs: SGLang's /pause_generation (in_place keeps a request
// and its KV, retract gives the KV back and recomputes at the resume) and /continue_generation,
// vLLM's /pause (abort by default; wait; keep), /resume and /is_paused. A paused request writes
// nothing until the resume and then ends as it would have; a request sent while paused waits;
// /health says "paused" and /health_generate answers 503; bad modes are 400s naming the field.
test('pause: requests stop where they are and go on at the resume', async () => {
  const call = async (method, route, body) => {
    const r = await fetch(server.baseUrl + route, { method, headers: { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    return { status: r.status, json: await r.json() };
  };
  const ask = { model: MODEL, prompt: 'Once upon a time', max_tokens: 1500, temperature: 0, ignore_eos: true };
  const want = (await post('/v1/completions', ask)).json.choices[0].text;
  // A streamed completion: its text so far, and a promise of its end (text, finish_reason).
  const stream = async () => {
    const r = await fetch(server.baseUrl + '/v1/completions', { method: 'POST',
      headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...ask, stream: true }) });
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    const s = { raw: '', text: '', finish: null };
    const read = (raw) => {
      for (const line of raw.split('\n')) {
        if (!line.startsWith('data: {')) continue;
        const choice = JSON.parse(line.slice(6)).choices[0];
        s.text += choice.text;
        if (choice.finish_reason) s.finish = choice.finish_reason;
      }
    };
    s.done = (async () => {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        s.raw += decoder.decode(value, { stream: true });
        const cut = s.raw.lastIndexOf('\n\n');
        if (cut >= 0) { read(s.raw.slice(0, cut)); s.raw = s.raw.slice(cut + 2); }
      }
      return s;
    })();
    while (s.text.length === 0 && s.finish === null) await new Promise((resolve) => setTimeout(resolve, 2));
    return s;
  };
  const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const onGpu = process.env.BEAMSERVE_DEVICE === 'cuda';
  for (const mode of ['in_place', 'retract']) {
    const s = await stream();
    const paused = await call('POST', '/pause_generation', { mode });
    assert.deepEqual(paused.json, { message: 'Generation paused successfully.', status: 'ok' });
    assert.deepEqual((await call('GET', '/is_paused')).json, { is_paused: true });
    assert.deepEqual((await call('GET', '/health')).json, { status: 'paused' });
    const probe = await call('GET', '/health_generate');
    assert.equal(probe.status, 503);
    assert.equal(probe.json.status, 'paused');
    const before = s.text;
    await pause(150);
    assert.equal(s.text, before, mode);
    assert.ok(before.length < want.length, mode);
    let answered = false;
    const waiting = post('/v1/completions', { ...ask, max_tokens: 4 }).then((r) => { answered = true; return r; });
    await pause(100);
    assert.equal(answered, false);
    const resumed = await call('POST', '/continue_generation', {});
    assert.deepEqual(resumed.json, { message: 'Generation continued successfully.', status: 'ok' });
    const done = await s.done;
    assert.equal(done.finish, 'length', mode);
    assert.ok(done.text.startsWith(before), mode);
    // On the GPU the request shares its steps with `waiting` after the resume (another batch
    // size rounds differently) and a retracted one recomputes its KV by prefill: exact text on
    // the CPU only; the kept request below, alone in its steps, is exact on both.
    if (!onGpu) assert.equal(done.text, want, mode);
    assert.equal((await waiting).status, 200);
  }
  // vLLM's /pause aborts by default: the request in flight ends at once.
  const s = await stream();
  assert.deepEqual((await call('POST', '/pause')).json, { status: 'paused' });
  const aborted = await s.done;
  assert.equal(aborted.finish, 'abort');
  assert.ok(aborted.text.length < want.length);
  assert.deepEqual((await call('POST', '/resume')).json, { status: 'resumed' });
  assert.deepEqual((await call('GET', '/is_paused')).json, { is_paused: false });
  assert.deepEqual((await call('GET', '/health')).json, { status: 'ok' });
  const kept = await stream();
  assert.deepEqual((await call('POST', '/pause?mode=keep&clear_cache=false')).json, { status: 'paused' });
  await pause(50);
  assert.deepEqual((await call('POST', '/resume')).json, { status: 'resumed' });
  assert.equal((await kept.done).text, want);
  for (const [method, route, body, param] of [['POST', '/pause?mode=later', undefined, 'mode'],
    ['POST', '/pause?clear_cache=maybe', undefined, 'clear_cache'],
    ['POST', '/pause_generation', { mode: 'keep' }, 'mode'],
    ['POST', '/pause_generation', { mode: 3 }, 'mode']]) {
    const bad = await call(method, route, body);
    assert.equal(bad.status, 400, route);
    assert.equal(bad.json.error.param, param, route);
  }
  assert.deepEqual((await call('GET', '/is_paused')).json, { is_paused: false });
});
