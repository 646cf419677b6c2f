// Bounded loopback load test: 512 concurrent streaming clients (chat, messages, completions) with
// random disconnects. Afterwards nothing remains in the engine, both KV pools are whole again,
// and the /metrics request counts add up to the requests sent. Prints the peak number of open
// connections and the server's resident memory at that point.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { readFileSync, writeFileSync } from 'node:fs';
import { startServer, metrics, requestCount } from './lib/harness.mjs';

const CLIENTS = Number(process.env.BEAMSERVE_LOAD_CLIENTS ?? 512);
const DEADLINE_MS = 150000;

// Deterministic pseudo-random numbers, so a failure can be replayed.
function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function requestFor(i, rand) {
  const shared = 'You are a helpful assistant. Answer briefly about the weather in Paris. ';  // shared prefix
  const maxTokens = 48 + Math.floor(rand() * 48);
  const kind = i % 8 === 0 ? 'messages' : i % 8 === 1 ? 'completions' : 'chat';
  const user = `${shared} Question ${i}: ${'abc'.repeat(1 + (i % 7))}`;
  if (kind === 'messages') {
    return { path: '/v1/messages', body: { model: 'tiny-chat', max_tokens: maxTokens, stream: true, ignore_eos: true,
      temperature: 0.8, seed: i, messages: [{ role: 'user', content: user }] } };
  }
  if (kind === 'completions') {
    return { path: '/v1/completions', body: { model: 'tiny-chat', prompt: user, max_tokens: maxTokens, stream: true,
      ignore_eos: true, seed: i } };
  }
  return { path: '/v1/chat/completions', body: { model: 'tiny-chat', max_tokens: maxTokens, stream: true,
    ignore_eos: true, seed: i, stream_options: { include_usage: true }, messages: [{ role: 'user', content: user }] } };
}

// One streaming client. `plan.abortAfter`: null = read to the end; 0 = close as soon as the
// request is on the wire; k > 0 = close after k more body chunks once `barrier` has resolved
// (so all streams are open at the same time before anyone leaves). `firstChunk` resolves when
// the stream has started (or the request ended without one).
function client(port, { path, body }, plan, startGate, barrier) {
  let firstChunk;
  const started = new Promise((r) => { firstChunk = r; });
  const result = { path, aborted: false, completed: false, chunks: 0, error: null, open: false, ended: false };
  const done = new Promise((resolve) => {
    const payload = JSON.stringify(body);
    const finish = () => { result.ended = true; firstChunk(); resolve(result); };
    const req = http.request({ host: '127.0.0.1', port, path, method: 'POST', agent: false,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } });
    const abort = () => {
      if (result.aborted) return;
      result.aborted = true;
      req.destroy();
      finish();
    };
    req.on('error', (e) => { if (!result.aborted) result.error = e.message; finish(); });
    req.on('response', (res) => {
      if (res.statusCode !== 200) result.error = `status ${res.statusCode}`;
      let text = '';
      let afterBarrier = 0;
      let barrierPassed = false;
      barrier.then(() => { barrierPassed = true; });
      res.on('data', (d) => {
        result.chunks++;
        text += d;
        if (!result.open && !result.aborted) {
          result.open = true;
          firstChunk();
        }
        if (barrierPassed && plan.abortAfter && ++afterBarrier >= plan.abortAfter) abort();
      });
      res.on('end', () => {
        result.completed = /data: \[DONE\]|event: message_stop/.test(text);
        finish();
      });
      res.on('error', () => finish());
    });
    if (plan.abortAfter === 0) req.on('finish', () => setTimeout(abort, 2));
    startGate.then(() => req.end(payload));
  });
  return { started, done, result };
}

function rssKb(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : 0;
}

test(`load: ${CLIENTS} concurrent streaming clients with random disconnects`, { timeout: DEADLINE_MS + 60000 }, async () => {
  const kvMb = process.env.BEAMSERVE_LOAD_KV_MB ?? '256';
  const server = await startServer(['--max-running', String(CLIENTS), '--kv-budget-mb', kvMb, '--io-threads', '1']);
  let deadlineTimer;
  try {
    const rand = rng(42);
    const before = await metrics(server.baseUrl);
    const rssIdleKb = rssKb(server.pid);
    let release;
    const gate = new Promise((r) => { release = r; });
    let openBarrier;
    const barrier = new Promise((r) => { openBarrier = r; });
    const clients = [];
    for (let i = 0; i < CLIENTS; i++) {
      // 40% leave mid-stream (after the barrier), the rest read to the end.
      const abortAfter = rand() < 0.4 ? 1 + Math.floor(rand() * 8) : null;
      clients.push(client(server.port, requestFor(i, rand), { abortAfter }, gate, barrier));
    }
    // 5% more clients that hang up as soon as their request is sent.
    const quitters = [];
    for (let i = 0; i < Math.ceil(CLIENTS / 20); i++) {
      quitters.push(client(server.port, requestFor(CLIENTS + i, rand), { abortAfter: 0 }, gate, barrier));
    }
    const t0 = Date.now();
    release();
    // Cleared in `finally`: a pending timer would hold node's event loop open until it fires.
    const deadline = new Promise((_, reject) => {
      deadlineTimer = setTimeout(() => reject(new Error('load test deadline')), DEADLINE_MS);
    });
    // Every stream has started: all of them are open at once.
    await Promise.race([Promise.all(clients.map((c) => c.started)), deadline]);
    const atBarrier = await metrics(server.baseUrl);
    const peakConnections = atBarrier.beamserve_open_connections - 1;  // minus this scrape
    const peakRssKb = rssKb(server.pid);
    const streamsOpen = clients.filter((c) => c.result.open && !c.result.ended).length;
    const firstChunkS = (Date.now() - t0) / 1000;
    openBarrier();
    const results = await Promise.race([Promise.all([...clients, ...quitters].map((c) => c.done)), deadline]);
    const elapsedS = (Date.now() - t0) / 1000;
    const SENT = clients.length + quitters.length;

    const errors = results.filter((r) => r.error);
    assert.deepEqual(errors.slice(0, 5), [], `${errors.length} clients failed`);
    const aborted = results.filter((r) => r.aborted).length;
    const completed = results.filter((r) => r.completed).length;
    assert.equal(aborted + completed, SENT);
    assert.equal(streamsOpen, CLIENTS, 'some streams ended before all had started');

    // Everything drains: no request in the engine, both pools whole again.
    let m;
    const t1 = Date.now();
    for (;;) {
      m = await metrics(server.baseUrl);
      const sent = requestCount(m, (e) => e.startsWith('/v1/')) - requestCount(before, (e) => e.startsWith('/v1/'));
      if (m.beamserve_active_generations === 0 && m.beamserve_requests_running === 0 &&
          m.beamserve_requests_waiting === 0 && sent === SENT) break;
      assert.ok(Date.now() - t1 < 30000, `server did not drain: ${JSON.stringify(m)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    for (const pool of ['full', 'sliding']) {
      const total = m[`beamserve_kv_blocks{pool="${pool}",state="total"}`];
      assert.equal(m[`beamserve_kv_blocks{pool="${pool}",state="used"}`], 0, pool);
      assert.equal(m[`beamserve_kv_blocks{pool="${pool}",state="free"}`] +
        m[`beamserve_kv_blocks{pool="${pool}",state="cached"}`], total, pool);
    }
    // The counts add up: every request is counted once, as 200 or 499 (client left first).
    const delta = (s) => requestCount(m, (e, st) => e.startsWith('/v1/') && st === s) -
      requestCount(before, (e, st) => e.startsWith('/v1/') && st === s);
    assert.equal(delta(200) + delta(499), SENT);
    assert.ok(delta(200) >= completed);
    assert.ok(delta(499) <= aborted);
    assert.ok(m.beamserve_open_connections <= 2);

    const report = { streaming_clients: CLIENTS, quitters: quitters.length, completed, aborted,
      all_streams_started_s: firstChunkS, elapsed_s: elapsedS, open_connections_at_barrier: peakConnections,
      server_rss_idle_mb: +(rssIdleKb / 1024).toFixed(1), server_rss_at_peak_mb: +(peakRssKb / 1024).toFixed(1),
      status_200: delta(200), status_499: delta(499),
      generated_tokens: m.beamserve_generated_tokens_total - before.beamserve_generated_tokens_total,
      prefix_cache_hit_rate: m.beamserve_prefix_cache_hit_rate };
    console.log('load report', JSON.stringify(report));
    if (process.env.BEAMSERVE_LOAD_REPORT) writeFileSync(process.env.BEAMSERVE_LOAD_REPORT, JSON.stringify(report, null, 1));
    assert.ok(peakConnections >= CLIENTS, `only ${peakConnections} connections were open at once`);
  } finally {
    clearTimeout(deadlineTimer);
    assert.equal(await server.stop(), 0);
  }
});
