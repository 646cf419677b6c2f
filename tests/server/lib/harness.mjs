// Test harness for the live-server tests: starts `beamserve serve` on a free port with
// models/tiny-beam and the tiny-chat fixture tokenizer, waits for /health, stops it afterwards,
// and loads the SDKs from tests/node/node_modules. BEAMSERVE_BIN names the binary and
// BEAMSERVE_DEVICE the device every server runs on (`--device`; default: the binary's, the CPU),
// so the same suites run against a server on the GPU (tools/gpu/run_client_tests.sh).
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '../../..');
const nodeRequire = createRequire(path.join(repoRoot, 'tests/node/package.json'));

// Imports an npm package installed in tests/node (cd tests/node && npm install).
export async function importNodePackage(name) {
  const mod = await import(pathToFileURL(nodeRequire.resolve(name)).href);
  return mod;
}

// How far a prompt logprob (from a prefill) may be from the output logprob of the same token
// (from a decode step): the same number on the CPU; on the GPU the two paths sum in other orders
// and round bf16 activations at other points, so they differ by rounding (0.004-0.086 on
// tiny-beam, runs 281-283), within the bound of tests/unit/model_beam_cuda/
// prompt_logprobs_cuda_test.cpp; a wrong position or token costs whole nats.
export const PREFILL_VS_DECODE = process.env.BEAMSERVE_DEVICE === 'cuda' ? 0.3 : 1e-4;

// Fixture ids (tests/server/fixtures/make_tiny_chat.py).
export const Tok = {
  ENDOFTEXT: 0, IM_START: 1, IM_END: 2, TOOL_CALL: 509, THINK_ANSWER: 510, HELLO: 511,
};

function findBinary() {
  if (process.env.BEAMSERVE_BIN) return process.env.BEAMSERVE_BIN;
  for (const dir of ['build/cpu-release', 'build/api', 'build/lead', 'build/beamserve']) {
    const p = path.join(repoRoot, dir, 'src/cli/beamserve');
    if (existsSync(p)) return p;
  }
  throw new Error('beamserve binary not found: set BEAMSERVE_BIN');
}

// Starts a server; resolves once /health answers 200. extraArgs are appended to the command line.
// Default: models/tiny-beam with the tiny-chat fixture tokenizer; `model` picks another model
// folder (with its own tokenizer when `tokenizer` is null).
export async function startServer(extraArgs = [], {
  timeoutMs = 60000, model = 'models/tiny-beam', tokenizer = 'tests/server/fixtures/tiny-chat', name = 'tiny-chat',
} = {}) {
  const args = ['serve', '--model', path.join(repoRoot, model),
    ...(tokenizer ? ['--tokenizer', path.join(repoRoot, tokenizer)] : []),
    '--served-model-name', name, '--port', '0', '--threads', '1', '--max-model-len', '4096',
    '--kv-budget-mb', '64', '--block-size', '16',
    ...(process.env.BEAMSERVE_DEVICE ? ['--device', process.env.BEAMSERVE_DEVICE] : []), ...extraArgs];
  const child = spawn(findBinary(), args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const log = [];
  let port = null;
  const portReady = new Promise((resolve, reject) => {
    child.stderr.setEncoding('utf8');
    let buffered = '';
    child.stderr.on('data', (chunk) => {
      buffered += chunk;
      let nl;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        log.push(line);
        if (log.length > 5000) log.shift();
        const m = /listening on http:\/\/[^:]+:(\d+)/.exec(line);
        if (m && port === null) {
          port = Number(m[1]);
          resolve(port);
        }
      }
    });
    child.on('exit', (code) => reject(new Error(`beamserve exited with ${code}:\n${log.join('\n')}`)));
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  try {
    await portReady;
  } catch (e) {
    clearTimeout(timer);  // (a server that failed to start leaves no timer holding the test open)
    throw e;
  }
  const baseUrl = `http://127.0.0.1:${port}`;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`beamserve exited before it was ready:\n${log.join('\n')}`);
    }
    try {
      const r = await fetch(`${baseUrl}/health`);
      if (r.status === 200) break;
    } catch { /* not accepting yet */ }
    await new Promise((r) => setTimeout(r, 50));
  }
  clearTimeout(timer);
  return {
    port, baseUrl, log, pid: child.pid,
    async stop() {
      if (child.exitCode !== null) return child.exitCode;
      const exited = new Promise((r) => child.on('exit', (code, signal) => r(code ?? signal)));
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 10000);
      const code = await exited;
      clearTimeout(t);
      return code;
    },
  };
}

// Parses the Prometheus text into {name{labels}: value}.
export function parseMetrics(text) {
  const out = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out[line.slice(0, i)] = Number(line.slice(i + 1));
  }
  return out;
}

export async function metrics(baseUrl, headers = {}) {
  const r = await fetch(`${baseUrl}/metrics`, { headers });
  return parseMetrics(await r.text());
}

// Sum of beamserve_http_requests_total over every endpoint and status matching `filter`.
export function requestCount(m, filter = () => true) {
  let n = 0;
  for (const [k, v] of Object.entries(m)) {
    const match = /^beamserve_http_requests_total\{endpoint="([^"]*)",status="(\d+)"\}$/.exec(k);
    if (match && filter(match[1], Number(match[2]))) n += v;
  }
  return n;
}

// Forcing biases for the fixture: the first output is `token`, the second the tokenizer eos
// (<|endoftext|>): min_tokens masks eos on step 1, repetition_penalty drops `token` on step 2.
export function forceOneToken(token) {
  return { logit_bias: { [token]: 100, [Tok.ENDOFTEXT]: 100 }, min_tokens: 1, repetition_penalty: 10, temperature: 0 };
}

// tiny-beam's routed-expert modules of layer 5 (experts 0-15: gate, up [32, 64], down [64, 32]).
export const TINY_BEAM_EXPERT_MODULES = Array.from({ length: 16 }, (_, e) => [
  [`model.layers.5.mlp.experts.${e}.gate_proj`, 32, 64],
  [`model.layers.5.mlp.experts.${e}.up_proj`, 32, 64],
  [`model.layers.5.mlp.experts.${e}.down_proj`, 64, 32]]).flat();

// A PEFT LoRA adapter of tiny-beam in a new temporary folder: F32 factors of rank 4, drawn from
// `seed`, on layer 0's q_proj and on lm_head, plus `extra` modules ([name, out, in]).
export function tinyBeamLora(seed = 7, extra = []) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'beam-lora-'));
  writeFileSync(path.join(dir, 'adapter_config.json'), JSON.stringify({ peft_type: 'LORA', r: 4,
    lora_alpha: 16, target_modules: ['q_proj', 'lm_head', 'gate_proj', 'up_proj', 'down_proj'],
    bias: 'none' }));
  const tensors = [];
  const random = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648 - 0.5; };
  for (const [module, out, inp] of [['model.layers.0.self_attn.q_proj', 512, 64], ['lm_head', 512, 64],
    ...extra]) {
    tensors.push([`base_model.model.${module}.lora_A.weight`, [4, inp]]);
    tensors.push([`base_model.model.${module}.lora_B.weight`, [out, 4]]);
  }
  const header = {};
  const chunks = [];
  let offset = 0;
  for (const [name, shape] of tensors) {
    const data = Buffer.alloc(shape[0] * shape[1] * 4);
    for (let i = 0; i < shape[0] * shape[1]; ++i) data.writeFloatLE(random(), 4 * i);
    header[name] = { dtype: 'F32', shape, data_offsets: [offset, offset + data.length] };
    chunks.push(data);
    offset += data.length;
  }
  let text = JSON.stringify(header);
  text += ' '.repeat((8 - (text.length % 8)) % 8);
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(text.length));
  writeFileSync(path.join(dir, 'adapter_model.safetensors'),
    Buffer.concat([length, Buffer.from(text), ...chunks]));
  return dir;
}

// A copy of models/tiny-beam (without its goldens) in a new temporary folder.
export function tinyBeamCopy() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'beam-weights-'));
  const src = path.join(repoRoot, 'models/tiny-beam');
  for (const f of readdirSync(src)) if (f !== 'golden') copyFileSync(path.join(src, f), path.join(dir, f));
  return dir;
}

// A copy of models/tiny-beam whose embedding rows come in reverse order: the same architecture,
// other weights (every value still a finite bf16).
export function tinyBeamWithReversedEmbedding() {
  const dir = tinyBeamCopy();
  const index = JSON.parse(readFileSync(path.join(dir, 'model.safetensors.index.json'), 'utf8'));
  const shard = path.join(dir, index.weight_map['model.embed_tokens.weight']);
  const bytes = readFileSync(shard);
  const headerLen = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + headerLen).toString('utf8'));
  const [rows, width] = header['model.embed_tokens.weight'].shape;
  const [begin] = header['model.embed_tokens.weight'].data_offsets;
  const data = bytes.subarray(8 + headerLen + begin);
  const rowBytes = width * 2;
  const copy = Buffer.from(data.subarray(0, rows * rowBytes));
  for (let r = 0; r < rows; ++r) copy.copy(data, r * rowBytes, (rows - 1 - r) * rowBytes, (rows - r) * rowBytes);
  writeFileSync(shard, bytes);
  return dir;
}
