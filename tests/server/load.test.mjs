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
  const maxTokens = 16 + Math.floor(rand() * 48);
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

// One streaming client. `abortAfter`: null = read to the end; 0 = close right after sending;
// k > 0 = close after k body chunks.
function client(port, { path, body }, abortAfter, startGate) {
  return new Promise((resolve) => {
    const payload = JSON.stringify(body);
    const result = { path, aborted: false, completed: false, chunks: 0, error: null };
    const req = http.request({ host: '127.0.0.1', port, path, method: 'POST', agent: false,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } });
    req.on('error', (e) => { if (!result.aborted) result.error = e.message; resolve(result); });
    req.on('response', (res) => {
      if (res.statusCode !== 200) result.error = `status ${res.statusCode}`;
      let text = '';
      res.on('data', (d) => {
        result.chunks++;
        text += d;
        if (abortAfter !== null && result.chunks >= abortAfter && !result.aborted) {
          result.aborted = true;
          req.destroy();
          resolve(result);
        }
      });
      res.on('end', () => {
        result.completed = /data: \[DONE\]|event: message_stop/.test(text);
        resolve(result);
      });
      res.on('error', () => resolve(result));
    });
    startGate.then(() => {
      req.end(payload);
      if (abortAfter === 0) {
        setTimeout(() => { result.aborted = true; req.destroy(); resolve(result); }, 5);
      }
    });
  });
}

function rssKb(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : 0;
}

test(`load: ${CLIENTS} concurrent streaming clients with random disconnects`, { timeout: DEADLINE_MS + 60000 }, async () => {
  const server = await startServer(['--max-running', String(CLIENTS), '--kv-budget-mb', '256', '--io-threads', '1']);
  try {
    const rand = rng(42);
    const before = await metrics(server.baseUrl);
    const rssIdleKb = rssKb(server.pid);
    let release;
    const gate = new Promise((r) => { release = r; });
    const plans = [];
    for (let i = 0; i < CLIENTS; i++) {
      const r = rand();
      const abortAfter = r < 0.05 ? 0 : r < 0.35 ? 1 + Math.floor(rand() * 6) : null;
      plans.push(client(server.port, requestFor(i, rand), abortAfter, gate));
    }
    // Watch the server while the clients run: peak connections and memory.
    let peakConnections = 0;
    let peakRssKb = 0;
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const m = await metrics(server.baseUrl);
        const open = m.beamserve_open_connections - 1;  // minus this scrape
        if (open > peakConnections) {
          peakConnections = open;
          peakRssKb = Math.max(peakRssKb, rssKb(server.pid));
        }
        await new Promise((r) => setTimeout(r, 25));
      }
    })();
    const t0 = Date.now();
    release();
    const deadline = new Promise((_, reject) => setTimeout(() => reject(new Error('load test deadline')), DEADLINE_MS));
    const results = await Promise.race([Promise.all(plans), deadline]);
    const elapsedS = (Date.now() - t0) / 1000;
    watching = false;
    await watcher;

    const errors = results.filter((r) => r.error);
    assert.deepEqual(errors.slice(0, 5), [], `${errors.length} clients failed`);
    const aborted = results.filter((r) => r.aborted).length;
    const completed = results.filter((r) => r.completed).length;
    assert.equal(aborted + completed, CLIENTS);

    // Everything drains: no request in the engine, both pools whole again.
    let m;
    const t1 = Date.now();
    for (;;) {
      m = await metrics(server.baseUrl);
      const sent = requestCount(m, (e) => e.startsWith('/v1/')) - requestCount(before, (e) => e.startsWith('/v1/'));
      if (m.beamserve_active_generations === 0 && m.beamserve_requests_running === 0 &&
          m.beamserve_requests_waiting === 0 && sent === CLIENTS) break;
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
    assert.equal(delta(200) + delta(499), CLIENTS);
    assert.ok(delta(200) >= completed);
    assert.ok(delta(499) <= aborted);
    assert.ok(m.beamserve_open_connections <= 2);

    const report = { clients: CLIENTS, completed, aborted, elapsed_s: elapsedS, peak_open_connections: peakConnections,
      server_rss_idle_mb: +(rssIdleKb / 1024).toFixed(1), server_rss_at_peak_mb: +(peakRssKb / 1024).toFixed(1),
      status_200: delta(200), status_499: delta(499),
      generated_tokens: m.beamserve_generated_tokens_total - before.beamserve_generated_tokens_total,
      prefix_cache_hit_rate: m.beamserve_prefix_cache_hit_rate };
    console.log('load report', JSON.stringify(report));
    if (process.env.BEAMSERVE_LOAD_REPORT) writeFileSync(process.env.BEAMSERVE_LOAD_REPORT, JSON.stringify(report, null, 1));
    assert.ok(peakConnections >= Math.min(CLIENTS, 500), `only ${peakConnections} connections were open at once`);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});
