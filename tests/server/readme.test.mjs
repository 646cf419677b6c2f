// The README's Serving section works exactly as written: every shell block (curl and the SDK
// snippet) runs against a live server on beam-nano, with only the port replaced, and must exit 0
// with a non-error answer of the documented kind.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { startServer, repoRoot } from './lib/harness.mjs';

let server;

// The ```sh blocks of README.md's "## Serving" section, without the line that starts the server.
function servingBlocks() {
  const readme = readFileSync(path.join(repoRoot, 'README.md'), 'utf8');
  const begin = readme.indexOf('\n## Serving');
  assert.ok(begin >= 0, 'README.md has a Serving section');
  const end = readme.indexOf('\n## ', begin + 1);
  const section = readme.slice(begin, end < 0 ? undefined : end);
  const blocks = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]);
  return blocks.map((b) => b.split('\n').filter((l) => !/^build\/beamserve serve\b/.test(l)).join('\n'));
}

function runBash(script) {
  return new Promise((resolve) => {
    execFile('bash', ['-euo', 'pipefail', '-c', script], { cwd: repoRoot, timeout: 120000, maxBuffer: 1 << 24 },
      (error, stdout, stderr) => resolve({ code: error ? (error.code ?? 1) : 0, stdout, stderr }));
  });
}

before(async () => {
  server = await startServer(['--kv-budget-mb', '512'], { model: 'models/beam-nano', tokenizer: null, name: 'beam-nano' });
});

after(async () => {
  assert.equal(await server.stop(), 0);
});

test('every Serving example of the README runs and answers', async () => {
  const blocks = servingBlocks();
  assert.ok(blocks.length >= 4, `found ${blocks.length} shell blocks`);
  // What each block's output must show (in README order).
  const expected = [
    [/"status":\s*"ok"/],
    [/"object":"chat\.completion"/, /data: \{.*"chat\.completion\.chunk"/, /data: \[DONE\]/, /"choices":\[\],"usage":\{"prompt_tokens"/],
    [/"object":"text_completion"/, /"type":"message"/, /"token_ids":\[\d/],
    [/input_tokens/],
  ];
  for (const [i, block] of blocks.entries()) {
    const script = block.replaceAll('localhost:8000', `localhost:${server.port}`)
      .replaceAll('127.0.0.1:8000', `127.0.0.1:${server.port}`);
    const r = await runBash(script);
    assert.equal(r.code, 0, `block ${i + 1} failed:\n${script}\nstderr: ${r.stderr}`);
    assert.ok(r.stdout.trim().length > 0, `block ${i + 1} printed nothing`);
    assert.doesNotMatch(r.stdout, /"error"\s*:/, `block ${i + 1} answered an error:\n${r.stdout}`);
    for (const re of expected[i] ?? []) assert.match(r.stdout, re, `block ${i + 1}`);
  }
});
