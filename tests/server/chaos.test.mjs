// Chaos against a live server: streaming and plain clients (OpenAI completions and chat, SGLang
// /generate with rids, n > 1, LoRA, seeded sampling, a JSON schema, beam search, prompt and output
// logprobs, embeddings) that hang up mid-stream, while two control loops pause and resume (every
// mode), abort by rid, update the weights (to the same ones), flush the cache, sleep and wake,
// and load / unload adapters. Every answer is well formed; a request
// that ends normally gives exactly the tokens it gives alone (the CPU is batch invariant), one
// that was aborted a prefix of them; no call hangs; afterwards nothing is paused or asleep,
// nothing remains in the engine, the KV pools are whole, the request counts add up and the
// catalogue still answers as before. Four configurations: two data-parallel replicas with sleep
// mode and LoRA; one engine with n-gram speculation, the host tier and a KV budget small enough
// to preempt; two tensor-parallel ranks with DFlash2 drafts; 64 clients against a KV budget of a
// few requests while a control loop swaps in other weights and back (answers then depend on the
// timing: each is checked for its form alone, and the catalogue exactly once the weights are
// back). With BEAMSERVE_DEVICE=cuda (the
// servers on a GPU: tools/gpu/run_client_tests.sh chaos) every server runs with
// --enable-deterministic-inference, so that answers stay exact under any batching, and a
// configuration needing more GPUs than the machine has is skipped.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { startServer, metrics, requestCount, repoRoot, tinyBeamLora, tinyBeamWithReversedEmbedding }
  from './lib/harness.mjs';

const MODEL = 'tiny-chat';
const TINY_BEAM = path.join(repoRoot, 'models/tiny-beam');
const CHAOS_MS = Number(process.env.BEAMSERVE_CHAOS_MS ?? 12000);
const CLIENTS = 12;  // concurrent clients, unless a configuration says otherwise
const CALL_TIMEOUT_MS = 60000;  // a request or control call not answered by then has hung
const ON_GPU = process.env.BEAMSERVE_DEVICE === 'cuda';

// Deterministic pseudo-random numbers, so a failure can be replayed (the timing still varies).
function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// One HTTP exchange over a fresh connection. `hangUpAfter`: close the connection after that many
// body chunks (a client leaving mid-stream; 0: a few ms after the request is sent). Resolves
// {status (0 before an answer), text, json, hungUp}; rejects when no answer came within
// CALL_TIMEOUT_MS or the server cut the connection.
function exchange(port, method, route, body, { hangUpAfter = null } = {}) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? '' : JSON.stringify(body);
    const what = `${method} ${route} ${payload.slice(0, 200)}`;
    const req = http.request({ host: '127.0.0.1', port, path: route, method, agent: false,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } });
    let settled = false;
    let status = 0;
    let text = '';
    const settle = (f) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      f();
    };
    const leave = () => {  // settled first: the errors the hang-up raises are ours
      settle(() => resolve({ status, text, json: null, hungUp: true }));
      req.destroy();
    };
    const timer = setTimeout(() => settle(() => {
      req.destroy();
      reject(new Error(`${what}: no answer in ${CALL_TIMEOUT_MS} ms`));
    }), CALL_TIMEOUT_MS);
    req.on('error', (e) => settle(() => reject(new Error(`${what}: ${e.message}`))));
    req.on('response', (res) => {
      status = res.statusCode;
      let chunks = 0;
      res.setEncoding('utf8');
      res.on('data', (d) => {
        text += d;
        if (hangUpAfter && ++chunks >= hangUpAfter) leave();
      });
      res.on('end', () => settle(() => {
        let json = null;
        try { json = JSON.parse(text); } catch { /* a stream or a text answer */ }
        resolve({ status, text, json, hungUp: false });
      }));
      res.on('error', (e) => settle(() => reject(new Error(
        `${what}: the server cut the answer after ${text.length} bytes (${e.message})`))));
    });
    if (hangUpAfter === 0) req.on('finish', () => setTimeout(leave, 1 + (payload.length % 7)));
    req.end(payload);
  });
}

// The server-sent events of a stream: the JSON of each complete `data: {...}` line, and whether
// the stream ended with [DONE].
function events(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('data: {')) continue;
    try { out.push(JSON.parse(line.slice(6))); } catch { /* a line cut by the hang-up */ }
  }
  return { events: out, done: text.includes('data: [DONE]') };
}

// The catalogue: requests whose answers alone are the reference (tokens, text, logprobs, beams,
// JSON under a schema, embeddings: all exact on the CPU). Prompts share a 40-token prefix
// (the prefix cache and the host tier take part). `lora`: the item names adapter 'a' (or 'b',
// loaded and unloaded by a control loop: a 404 naming the model while it is not there).
function catalogue(withLora, withCaptures) {
  const shared = Array.from({ length: 40 }, (_, i) => 20 + ((i * 7) % 300));
  const prompt = (k) => [...shared, ...Array.from({ length: 3 + (k % 9) }, (_, i) => 100 + ((k * 13 + i * 5) % 350))];
  const items = [];
  for (let k = 0; k < 16; ++k) {
    const maxTokens = 16 + ((k * 11) % 48);
    const sampling = k % 8 >= 5 && k % 2 === 1 ? { temperature: 0.8, seed: 1000 + k } : { temperature: 0 };
    const model = withLora && k % 5 === 1 ? 'a' : withLora && k % 5 === 2 ? 'b' : MODEL;
    const kind = ['completions', 'stream', 'generate', 'chat'][k % 4];
    if (kind === 'generate') {
      items.push({ kind, model, route: '/generate', body: { input_ids: prompt(k),
        ...(model === MODEL ? {} : { lora_path: model }),
        sampling_params: { max_new_tokens: maxTokens, ignore_eos: true, ...sampling } } });
    } else if (kind === 'chat') {
      items.push({ kind, model, route: '/v1/chat/completions', body: { model, max_tokens: maxTokens,
        ignore_eos: true, ...sampling, messages: [{ role: 'user', content: `Question ${k}: ${'abc '.repeat(k)}` }] } });
    } else {
      items.push({ kind, model, route: '/v1/completions', body: { model, prompt: prompt(k), max_tokens: maxTokens,
        ignore_eos: true, n: k % 6 === 0 ? 2 : 1, ...sampling, ...(kind === 'stream' ? { stream: true } : {}) } });
    }
  }
  // Requests whose state goes beyond tokens: a grammar, beams, prompt and output logprobs, a
  // pooled hidden state.
  const schema = { type: 'object', properties: { ok: { type: 'boolean' }, size: { enum: ['s', 'm', 'l'] },
    count: { type: 'integer', minimum: 0, maximum: 99 } }, required: ['ok', 'size', 'count'] };
  items.push({ kind: 'chat', model: MODEL, route: '/v1/chat/completions', body: { model: MODEL, max_tokens: 40,
    temperature: 0, messages: [{ role: 'user', content: 'An item, as JSON.' }],
    response_format: { type: 'json_schema', json_schema: { name: 'item', schema } } } });
  items.push({ kind: 'beams', model: MODEL, route: '/v1/completions', body: { model: MODEL, prompt: prompt(3),
    max_tokens: 8, n: 3, use_beam_search: true, ignore_eos: true } });
  items.push({ kind: 'generate', model: MODEL, route: '/generate', body: { input_ids: prompt(5),
    return_logprob: true, logprob_start_len: 0, top_logprobs_num: 2,
    sampling_params: { max_new_tokens: 24, ignore_eos: true, temperature: 0 } } });
  items.push({ kind: 'embed', model: MODEL, route: '/v1/embeddings', body: { model: MODEL,
    input: [prompt(6), prompt(7)] } });
  // Anthropic's and the Responses API's streams: their text alone is the reference; an abort ends
  // them with an error event (Anthropic's API has no stop reason for one) or the Responses status
  // cancelled, the text so far a prefix.
  items.push({ kind: 'messages', model: MODEL, route: '/v1/messages', body: { model: MODEL, max_tokens: 24,
    temperature: 0, stream: true, messages: [{ role: 'user', content: 'Tell me about the weather.' }] } });
  items.push({ kind: 'responses', model: MODEL, route: '/v1/responses', body: { model: MODEL,
    max_output_tokens: 24, temperature: 0, stream: true, input: 'Tell me about the sea.' } });
  if (withCaptures) {  // every position's routed experts and last hidden state (RL replay)
    items.push({ kind: 'captures', model: MODEL, route: '/generate', body: { input_ids: prompt(9), max_tokens: 12,
      ignore_eos: true, temperature: 0, return_routed_experts: true, return_hidden_states: true } });
  }
  return items;
}

// What an answer generated: per choice its text (or output ids), finish reason (null if the
// stream was cut) and, for chat, the whole message. Throws on a malformed answer.
function outcome(item, r) {
  if (item.kind === 'generate') {
    const m = r.json.meta_info;
    return [{ out: r.json.output_ids, finish: m.finish_reason.type,
      ...(item.body.return_logprob ? { prompt: m.input_token_logprobs, logprobs: m.output_token_logprobs,
        top: m.output_top_logprobs } : {}) }];
  }
  if (item.kind === 'embed') return r.json.data.map((d) => ({ out: d.embedding, finish: 'pooled' }));
  if (item.kind === 'messages' || item.kind === 'responses') {
    const evs = [];
    for (const block of r.text.split('\n\n')) {
      const data = block.split('\n').find((l) => l.startsWith('data: {'));
      if (data) try { evs.push(JSON.parse(data.slice(6))); } catch { /* cut by the hang-up */ }
    }
    let text = '';
    let finish = null;
    for (const e of evs) {
      if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') text += e.delta.text;
      if (e.type === 'message_delta') finish = e.delta.stop_reason;
      if (e.type === 'response.output_text.delta') text += e.delta;
      if (/^response\.(completed|incomplete|cancelled|failed)$/.test(e.type)) finish = e.response.status;
      if (e.type === 'error') {  // Anthropic's for an abort (its API has no stop reason for one)
        assert.match(e.error.message, /the request was aborted before it finished/, r.text.slice(-400));
        return [{ out: text, finish: 'abort' }];
      }
    }
    if (!r.hungUp) assert.ok(finish !== null, `${item.route}: the stream has no end: ${r.text.slice(-300)}`);
    return [{ out: text, finish: finish === 'cancelled' ? 'abort' : finish }];
  }
  if (item.kind === 'captures') {
    const c = r.json.choices[0];
    return [{ out: c.text, finish: c.finish_reason, routed: c.routed_experts, hidden: c.hidden_states }];
  }
  if (item.kind === 'chat') {
    const c = r.json.choices[0];
    return [{ out: c.message, finish: c.finish_reason }];
  }
  if (item.kind === 'stream') {
    const { events: evs, done } = events(r.text);
    const n = item.body.n;
    const choices = Array.from({ length: n }, () => ({ out: '', finish: null }));
    for (const e of evs) {
      for (const c of e.choices) {
        choices[c.index].out += c.text;
        if (c.finish_reason) choices[c.index].finish = c.finish_reason;
      }
    }
    if (!r.hungUp) assert.ok(done, `stream without [DONE]: ${r.text.slice(-300)}`);
    return choices;
  }
  return [...r.json.choices].sort((a, b) => a.index - b.index).map((c) => ({ out: c.text, finish: c.finish_reason }));
}

const isPrefix = (part, whole) => (typeof whole === 'string' ? whole.startsWith(part)
  : part.length <= whole.length && part.every((t, i) => t === whole[i]));

// Checks one answer under chaos against the item's reference (`exact`: the weights stayed the
// reference's; otherwise only the answer's form); returns its class for the tally.
function check(item, r, reference, exact) {
  if (r.hungUp && !item.body.stream) return 'left';  // hung up before the whole answer came
  const where = `${item.route} ${JSON.stringify(item.body).slice(0, 160)} -> ${r.status} ${r.text.slice(0, 300)}`;
  if (!item.body.stream) assert.ok(r.json, `not JSON: ${where}`);
  // Adapter b unloaded at that moment (or between the endpoint's check and the submit).
  if (r.status === 404 && item.model === 'b') {
    assert.equal(r.json.error.param, item.kind === 'generate' ? 'lora_path' : 'model', where);
    return 'unloaded';
  }
  // Aborted before its prompt ran (embeddings) or before its stream started (Anthropic's).
  if (r.status === 503 && (item.kind === 'embed' || item.kind === 'messages')) {
    assert.match(JSON.parse(r.text).error.message, /aborted before (input \d+'s prompt ran|it finished)/, where);
    return 'aborted';
  }
  assert.equal(r.status, 200, where);
  const got = outcome(item, r);
  assert.equal(got.length, reference.length, where);
  let cls = 'complete';
  got.forEach((g, i) => {
    const want = reference[i];
    if (g.finish === 'abort' || g.finish === 'cancelled' || g.finish === null) {  // ('cancelled': native)
      cls = r.hungUp ? 'hung-up' : 'aborted';
      // Parsed messages have no prefix to compare; an aborted beam search answers its beams so
      // far, which need not lead to the final ones.
      if (item.kind === 'chat' || item.kind === 'beams' || !exact) return;
      assert.ok(isPrefix(g.out, want.out), `${where}\nchoice ${i}: not a prefix of ${JSON.stringify(want.out)}`);
      if (g.routed) assert.ok(want.routed.startsWith(g.routed.slice(0, 4 * Math.floor(g.routed.length / 4 - 1))), where);
      if (g.logprobs) {
        assert.deepEqual(g.logprobs, want.logprobs.slice(0, g.logprobs.length), where);
        // Aborted before its prefill: every prompt logprob null (none computed).
        if (g.prompt.some(([logprob]) => logprob !== null)) assert.deepEqual(g.prompt, want.prompt, where);
      }
    } else if (exact) {
      assert.deepEqual(g, want, where);
    } else {
      wellFormed(item, g, want, `${where}\nchoice ${i}`);
    }
  });
  return cls;
}

// An answer that ended normally under weights other than the reference's: the reference's shape
// (lengths of token lists, logprobs and embeddings; the finish where the length alone decides it)
// with values of the right kinds.
function wellFormed(item, g, want, where) {
  const ignoresEos = item.body.ignore_eos ?? item.body.sampling_params?.ignore_eos ?? false;
  if (ignoresEos || item.kind === 'beams' || item.kind === 'embed') assert.equal(g.finish, want.finish, where);
  else assert.ok(['stop', 'length', 'end_turn', 'max_tokens', 'completed', 'incomplete'].includes(g.finish), where);
  if (item.kind === 'generate') {
    assert.ok(g.out.every(Number.isInteger), where);
    if (ignoresEos) assert.equal(g.out.length, want.out.length, where);
    if (g.logprobs) {
      assert.equal(g.logprobs.length, g.out.length, where);
      assert.equal(g.prompt.length, want.prompt.length, where);
      for (const [logprob] of g.logprobs) assert.ok(Number.isFinite(logprob) && logprob <= 0, where);
    }
  } else if (item.kind === 'embed') {
    assert.equal(g.out.length, want.out.length, where);
    assert.ok(g.out.every(Number.isFinite), where);
  } else if (item.kind === 'chat') {
    assert.equal(g.out.role, 'assistant', where);
    // A complete answer keeps the schema, unless it reasoned first: the reasoning is free and
    // may end the output before its </think> (docs/structured_output.md "Reasoning models").
    if (item.body.response_format && g.finish === 'stop' && !g.out.reasoning_content) {
      const value = JSON.parse(g.out.content);
      assert.deepEqual(Object.keys(value).sort(), ['count', 'ok', 'size'], where);
    }
  } else {
    assert.equal(typeof g.out, 'string', where);
  }
}

// The control calls a loop draws from, each a sequence of steps that leaves the server as it
// found it (a pause is always resumed, a sleep woken, a loaded adapter unloaded). A step's
// answer must be a 200 or a well-formed 4xx that says why (e.g. "already paused" while the
// other loop holds a pause).
function controls({ sleepMode, withLora, lora, otherWeights }) {
  const list = [
    [['POST', '/pause_generation', { mode: 'in_place' }], 'wait', ['POST', '/continue_generation', {}]],
    [['POST', '/pause_generation', { mode: 'retract' }], 'wait', ['POST', '/continue_generation', {}]],
    [['POST', '/pause?mode=keep&clear_cache=false'], 'wait', ['POST', '/resume']],
    [['POST', '/pause'], 'wait', ['POST', '/resume']],  // vLLM's default: abort what runs
    [['POST', '/pause?mode=wait'], ['POST', '/resume']],
    [['POST', '/update_weights_from_disk', { model_path: TINY_BEAM, abort_all_requests: false }]],
    [['POST', '/update_weights_from_disk', { model_path: TINY_BEAM, abort_all_requests: true }]],
    [['POST', '/flush_cache', {}]],
    [['POST', '/abort_request', 'rid']],  // a /generate request in flight, by its rid
    [['POST', '/abort_request', { abort_all: true }]],
    [['GET', '/get_server_info'], ['GET', '/get_load'], ['GET', '/metrics'], ['GET', '/health']],
  ];
  if (sleepMode) {
    list.push([['POST', '/sleep?level=1'], 'wait', ['POST', '/wake_up']]);
    list.push([['POST', '/sleep?level=2'], 'wait', ['POST', '/wake_up'],
      ['POST', '/update_weights_from_disk', { model_path: TINY_BEAM }]]);
    list.push([['POST', '/release_memory_occupation', {}], 'wait', ['POST', '/resume_memory_occupation', {}]]);
  }
  if (otherWeights) {  // other weights for a while (answers then differ), then the reference's
    list.push([['POST', '/update_weights_from_disk', { model_path: otherWeights, weight_version: 'other' }], 'wait',
      ['POST', '/update_weights_from_disk', { model_path: TINY_BEAM, weight_version: 'default' }]]);
  }
  if (withLora) {
    list.push([['POST', '/v1/unload_lora_adapter', { lora_name: 'b' }], 'wait',
      ['POST', '/v1/load_lora_adapter', { lora_name: 'b', lora_path: lora }]]);
    list.push([['POST', '/load_lora_adapter', { lora_name: 'a', lora_path: lora, load_inplace: true }]]);
  }
  return list;
}

async function chaos(t, { args, clients = CLIENTS, sleepMode = false, withLora = false, withCaptures = false,
  otherWeights = false, expectPreemption = false, seed }) {
  const lora = withLora ? tinyBeamLora() : null;
  const other = otherWeights ? tinyBeamWithReversedEmbedding() : null;
  const removeFolders = () => {
    for (const dir of [lora, other]) if (dir) fs.rmSync(dir, { recursive: true, force: true });
  };
  let server;
  try {
    server = await startServer([...args, '--enable-weight-updates',
      ...(ON_GPU ? ['--enable-deterministic-inference'] : []),
      ...(sleepMode ? ['--enable-sleep-mode'] : []),
      ...(withCaptures ? ['--enable-return-routed-experts', '--enable-return-hidden-states'] : []),
      ...(withLora ? ['--lora-modules', `a=${lora}`, 'b=' + lora, '--max-loras', '2', '--max-lora-rank', '8',
        '--max-loaded-loras', '3'] : [])]);
  } catch (e) {  // on a GPU machine: two replicas or ranks need two GPUs (the error says so)
    removeFolders();
    if (ON_GPU && /GPU/.test(String(e.message))) return t.skip(String(e.message).split('\n')[0]);
    throw e;
  }
  const port = server.port;
  try {
    const items = catalogue(withLora, withCaptures);
    const reference = [];
    for (const item of items) {
      const r = await exchange(port, 'POST', item.route, item.body);
      assert.equal(r.status, 200, `${item.route}: ${r.text}`);
      reference.push(outcome(item, r));
    }
    // A request is counted as its answer goes out: wait for the reference's last count.
    const generation = (e) => ['/v1/completions', '/v1/chat/completions', '/generate', '/v1/embeddings',
      '/v1/messages', '/v1/responses'].includes(e);
    const drained = async (expected) => {
      const t0 = Date.now();
      for (;;) {
        const m = await metrics(server.baseUrl);
        const counted = requestCount(m, generation);
        if (m.beamserve_active_generations === 0 && m.beamserve_requests_running === 0 &&
            m.beamserve_requests_waiting === 0 && counted === expected) return m;
        assert.ok(Date.now() - t0 < 30000, `server did not drain (${counted} of ${expected} counted): ${JSON.stringify(m)}`);
        await sleep(50);
      }
    };
    const before = await drained(items.length);

    const stopAt = Date.now() + CHAOS_MS;
    const tally = {};
    const count = (key) => { tally[key] = (tally[key] ?? 0) + 1; };
    let sent = 0;
    const refusals = new Set();  // the control calls' distinct refusals, for the log
    const inFlight = new Set();  // the rids of /generate requests sent and not answered yet
    const client = async (c) => {
      const rand = rng(seed * 1000 + c);
      while (Date.now() < stopAt) {
        const k = Math.floor(rand() * items.length);
        const item = items[k];
        const leave = rand();
        const hangUpAfter = item.body.stream && leave < 0.3 ? 1 + Math.floor(rand() * 6)
          : leave < 0.05 ? 0 : null;
        const rid = `c${c}-${sent++}`;
        const body = item.kind === 'generate' ? { ...item.body, rid } : item.body;
        if (item.kind === 'generate') inFlight.add(rid);
        const r = await exchange(port, 'POST', item.route, body, { hangUpAfter });
        inFlight.delete(rid);
        count(check(item, r, reference[k], other === null));
      }
    };
    const controlLoop = async (c) => {
      const rand = rng(seed * 7777 + c);
      const list = controls({ sleepMode, withLora, lora, otherWeights: other });
      while (Date.now() < stopAt) {
        const steps = list[Math.floor(rand() * list.length)];
        for (const step of steps) {
          if (step === 'wait') { await sleep(20 + Math.floor(rand() * 200)); continue; }
          const [method, route, named] = step;
          const body = named === 'rid' ? { rid: [...inFlight][Math.floor(rand() * inFlight.size)] ?? 'gone' } : named;
          const r = await exchange(port, method, route, body);
          const where = `${method} ${route} ${JSON.stringify(body ?? '')} -> ${r.status} ${r.text.slice(0, 300)}`;
          assert.ok(r.status === 200 || (r.status >= 400 && r.status < 500), where);
          if (r.status !== 200) assert.ok(r.json && (r.json.error?.message || r.json.message), where);
          count(`${route.split('?')[0]} ${r.status}`);
          if (r.status !== 200) {
            const why = r.json.error?.message ?? r.json.message;
            // A call is done on every replica or refused as a whole: a refusal for another call
            // in progress names no replica (one replica's would leave the replicas apart).
            assert.ok(!/replica \d+: another/.test(why), where);
            refusals.add(`${route.split('?')[0]}: ${why}`);
          }
        }
        await sleep(50 + Math.floor(rand() * 250));
      }
    };
    await Promise.all([...Array.from({ length: clients }, (_, c) => client(c)), controlLoop(0), controlLoop(1)]);
    if (other) {  // the reference's weights back, whichever loop updated last
      const r = await exchange(port, 'POST', '/update_weights_from_disk', { model_path: TINY_BEAM, weight_version: 'default' });
      assert.equal(r.status, 200, r.text);
    }

    // Nothing is left paused or asleep; the engine drains; the pools are whole.
    const get = async (route) => (await exchange(port, 'GET', route)).json;
    assert.deepEqual(await get('/is_paused'), { is_paused: false });
    if (sleepMode) assert.deepEqual(await get('/is_sleeping'), { is_sleeping: false });
    assert.deepEqual(await get('/health'), { status: 'ok' });
    const m = await drained(items.length + sent);
    for (const pool of ['full', 'sliding']) {
      const total = m[`beamserve_kv_blocks{pool="${pool}",state="total"}`];
      assert.equal(m[`beamserve_kv_blocks{pool="${pool}",state="used"}`], 0, pool);
      assert.equal(m[`beamserve_kv_blocks{pool="${pool}",state="free"}`] +
        m[`beamserve_kv_blocks{pool="${pool}",state="cached"}`], total, pool);
    }
    if (expectPreemption) assert.ok(m.beamserve_preemptions_total > before.beamserve_preemptions_total, 'no preemption');
    // The catalogue answers as it did before the chaos.
    for (const [k, item] of items.entries()) {
      const r = await exchange(port, 'POST', item.route, item.body);
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(outcome(item, r), reference[k], item.route);
    }
    t.diagnostic(`sent ${sent}: ${JSON.stringify(tally)}`);
    console.log('chaos tally', JSON.stringify({ args, sent, tally, refusals: [...refusals] }, null, 1));
    assert.ok((tally.complete ?? 0) > 0 && (tally.aborted ?? 0) + (tally['hung-up'] ?? 0) > 0, JSON.stringify(tally));
  } finally {
    assert.equal(await server.stop(), 0);
    removeFolders();
  }
}

test('chaos: two data-parallel replicas, sleep mode and LoRA under control calls and hang-ups',
  { timeout: CHAOS_MS + 180000 }, async (t) => {
    await chaos(t, { args: ['--data-parallel-size', '2', '--max-running', '16'], sleepMode: true, withLora: true,
      withCaptures: true, seed: 1 });
  });

test('chaos: n-gram speculation, the host tier and preemption under control calls and hang-ups',
  { timeout: CHAOS_MS + 180000 }, async (t) => {
    await chaos(t, { args: ['--speculative-algorithm', 'NGRAM', '--speculative-num-draft-tokens', '4',
      '--enable-hierarchical-cache', '--hicache-write-policy', 'write_through', '--kv-budget-mb', '13',
      '--max-running', '16', '--max-tokens-per-step', '32'], expectPreemption: true,
    seed: 2 });
  });

test('chaos: two tensor-parallel ranks, DFlash2 drafts, sleep mode and LoRA under control calls and hang-ups',
  { timeout: CHAOS_MS + 180000 }, async (t) => {
    await chaos(t, { args: ['--tp-size', '2', '--speculative-algorithm', 'DFLASH', '--speculative-draft-model-path',
      path.join(repoRoot, 'models/tiny-beam-dflash2-trained'), '--enable-hierarchical-cache', '--max-running', '16'],
    sleepMode: true, withLora: true, seed: 3 });
  });

test('chaos: 64 clients against a KV budget of a few requests while the weights change under them',
  { timeout: CHAOS_MS + 180000 }, async (t) => {
    await chaos(t, { args: ['--kv-budget-mb', '16', '--max-running', '64', '--max-tokens-per-step', '64'], clients: 64,
      sleepMode: true, otherWeights: true, expectPreemption: true, seed: 4 });
  });
