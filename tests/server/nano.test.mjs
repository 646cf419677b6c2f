// The official clients against a live beamserve serving the trained models/beam-nano with its own
// tokenizer and chat template: greedy completions reproduce the reference's continuations
// (models/beam-nano/golden/greedy.json) word for word, plain and streamed, and chat/messages
// answer with well-formed text from the real model, also as JSON of a response_format schema.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { startServer, importNodePackage, repoRoot } from './lib/harness.mjs';

const MODEL = 'beam-nano';
const golden = JSON.parse(readFileSync(path.join(repoRoot, 'models/beam-nano/golden/greedy.json'), 'utf8'));
let server;
let openai;
let anthropic;

before(async () => {
  server = await startServer(['--threads', '2', '--kv-budget-mb', '512'], { model: 'models/beam-nano', tokenizer: null, name: MODEL });
  const { default: OpenAI } = await importNodePackage('openai');
  const { default: Anthropic } = await importNodePackage('@anthropic-ai/sdk');
  openai = new OpenAI({ apiKey: 'unused', baseURL: `${server.baseUrl}/v1`, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: 'unused', baseURL: server.baseUrl, maxRetries: 0 });
});

after(async () => {
  assert.equal(await server.stop(), 0);
});

test('completions: greedy text equals the reference continuation for every golden prompt', async () => {
  const { max_new_tokens: maxTokens } = golden.decoding;
  const results = await Promise.all(golden.cases.map((c) => openai.completions.create({
    model: MODEL, prompt: c.prompt, max_tokens: maxTokens, temperature: 0,
  })));
  results.forEach((r, i) => {
    const c = golden.cases[i];
    assert.equal(r.choices[0].text, c.generated_text, `case ${c.source}`);
    assert.equal(r.usage.prompt_tokens, c.prompt_ids.length);
    assert.equal(r.usage.completion_tokens, c.generated_ids.length);
    assert.equal(r.choices[0].finish_reason, c.generated_ids.length < maxTokens ? 'stop' : 'length');
  });
});

test('completions: the streamed deltas concatenate to the same continuation', async () => {
  const c = golden.cases[0];
  const stream = await openai.completions.create({
    model: MODEL, prompt: c.prompt, max_tokens: golden.decoding.max_new_tokens, temperature: 0, stream: true,
  });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
  assert.equal(text, c.generated_text);
});

test('chat: the model answers through its chat template with usage and a finish reason', async () => {
  const r = await openai.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'Write a Python function that adds two numbers.' }],
    max_tokens: 24, temperature: 0,
  });
  const m = r.choices[0].message;
  assert.equal(m.role, 'assistant');
  assert.equal(typeof m.content, 'string');
  assert.ok(m.content.length > 0, 'non-empty answer');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 10 && r.usage.completion_tokens > 0 && r.usage.completion_tokens <= 24);
  // Greedy is deterministic: the same request gives the same answer.
  const again = await openai.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'Write a Python function that adds two numbers.' }],
    max_tokens: 24, temperature: 0,
  });
  assert.equal(again.choices[0].message.content, m.content);
});

test('messages: Anthropic client gets a text block and token usage from the real model', async () => {
  const r = await anthropic.messages.create({
    model: MODEL, max_tokens: 16, temperature: 0,
    messages: [{ role: 'user', content: 'def fibonacci(n):' }],
  });
  assert.equal(r.type, 'message');
  assert.equal(r.role, 'assistant');
  const text = r.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
  assert.ok(text.length > 0);
  assert.ok(['end_turn', 'max_tokens', 'stop_sequence'].includes(r.stop_reason));
  assert.ok(r.usage.input_tokens > 0 && r.usage.output_tokens > 0 && r.usage.output_tokens <= 16);
  const count = await anthropic.messages.countTokens({ model: MODEL, messages: [{ role: 'user', content: 'def fibonacci(n):' }] });
  assert.equal(count.input_tokens, r.usage.input_tokens);
});

test('chat: the trained model answers in JSON of a schema, and json_object gives an object', async () => {
  const schema = {
    type: 'object',
    properties: {
      name: { type: 'string', maxLength: 20 },
      language: { enum: ['c++', 'python', 'go', 'rust'] },
      lines: { type: 'integer' },
    },
    required: ['name', 'language', 'lines'],
  };
  const r = await openai.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'Describe a function as JSON.' }], max_tokens: 200,
    temperature: 0, response_format: { type: 'json_schema', json_schema: { name: 'fn', schema } },
  });
  assert.equal(r.choices[0].finish_reason, 'stop');
  const v = JSON.parse(r.choices[0].message.content);
  assert.deepEqual(Object.keys(v), ['name', 'language', 'lines']);
  assert.ok(['c++', 'python', 'go', 'rust'].includes(v.language));
  assert.ok(Number.isInteger(v.lines));
  const o = await openai.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'A JSON object, please.' }], max_tokens: 200,
    temperature: 0, response_format: { type: 'json_object' },
  });
  if (o.choices[0].finish_reason === 'stop') {
    const parsed = JSON.parse(o.choices[0].message.content);
    assert.equal(typeof parsed, 'object');
    assert.ok(parsed !== null && !Array.isArray(parsed));
  } else {
    assert.ok(o.choices[0].message.content.trimStart().startsWith('{'));
  }
});

// Speculative decoding with n-gram drafts (vLLM's --speculative-config): the golden greedy
// continuations come out word for word, plain and streamed (several tokens a chunk), a seeded
// sampled completion equals the plain server's, and /metrics and /get_server_info show drafts
// verified and accepted.
test('speculative decoding: the same text as plain decoding, with drafts accepted', async () => {
  const spec = await startServer(['--threads', '2', '--kv-budget-mb', '512', '--speculative-config',
    JSON.stringify({ method: 'ngram', num_speculative_tokens: 4, prompt_lookup_max: 3, prompt_lookup_min: 1 })],
  { model: 'models/beam-nano', tokenizer: null, name: MODEL });
  try {
    const client = new (await importNodePackage('openai')).default(
      { apiKey: 'unused', baseURL: `${spec.baseUrl}/v1`, maxRetries: 0 });
    const { max_new_tokens: maxTokens } = golden.decoding;
    const results = await Promise.all(golden.cases.map((c) => client.completions.create({
      model: MODEL, prompt: c.prompt, max_tokens: maxTokens, temperature: 0,
    })));
    results.forEach((r, i) => assert.equal(r.choices[0].text, golden.cases[i].generated_text));
    const c = golden.cases[0];
    let text = '';
    for await (const chunk of await client.completions.create({
      model: MODEL, prompt: c.prompt, max_tokens: maxTokens, temperature: 0, stream: true })) {
      text += chunk.choices[0]?.text ?? '';
    }
    assert.equal(text, c.generated_text);
    const repeated = 'def scale(values, factor):\n    return [v * factor for v in values]\n\n';
    const sampled = { model: MODEL, prompt: repeated + repeated + 'def', max_tokens: 40, temperature: 0.8, seed: 5 };
    assert.equal((await client.completions.create(sampled)).choices[0].text,
      (await openai.completions.create(sampled)).choices[0].text);
    // SGLang's /generate reports each request's verifications (spec_verify_ct).
    const generate = async (base) => (await (await fetch(base + '/generate', { method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ text: repeated + repeated + 'def', sampling_params: { max_new_tokens: 24, temperature: 0 } }),
    })).json()).meta_info.spec_verify_ct;
    assert.ok(await generate(spec.baseUrl) > 0);
    assert.equal(await generate(server.baseUrl), 0);
    const metrics = await (await fetch(spec.baseUrl + '/metrics')).text();
    const counter = (name) => Number(metrics.match(new RegExp(`^${name} (\\S+)$`, 'm'))[1]);
    assert.ok(counter('beamserve_spec_decode_num_draft_tokens_total') > 0);
    assert.ok(counter('beamserve_spec_decode_num_accepted_tokens_total') > 0);
    assert.match(metrics, /^beamserve_spec_decode_num_accepted_tokens_per_pos_total\{position="3"\} \d+$/m);
    const info = await (await fetch(spec.baseUrl + '/get_server_info')).json();
    assert.equal(info.speculative_algorithm, 'NGRAM');
    assert.equal(info.speculative_num_draft_tokens, 5);
    assert.equal(info.speculative_ngram_max_match_window_size, 3);
    assert.ok(info.internal_states[0].avg_spec_accept_length > 1);
    const plainInfo = await (await fetch(server.baseUrl + '/get_server_info')).json();
    assert.equal(plainInfo.speculative_algorithm, null);
  } finally {
    assert.equal(await spec.stop(), 0);
  }
});

// Tensor parallelism (vLLM's --tensor-parallel-size, SGLang's --tp-size): the model split over
// two ranks serves the golden greedy continuations word for word, /get_server_info says so, and
// an update_weights_from_disk (each rank loading its experts) keeps serving them.
test('tensor parallelism: two ranks give the reference continuations', async (t) => {
  let tp;
  try {
    tp = await startServer(['--threads', '2', '--kv-budget-mb', '512', '--tp-size', '2',
      '--enable-weight-updates'], { model: 'models/beam-nano', tokenizer: null, name: MODEL });
  } catch (e) {  // on a GPU machine: two GPUs and NCCL are needed (the error says which is missing)
    if (/needs as many GPUs|NCCL/.test(String(e.message))) return t.skip(String(e.message).split('\n')[0]);
    throw e;
  }
  try {
    const client = new (await importNodePackage('openai')).default(
      { apiKey: 'unused', baseURL: `${tp.baseUrl}/v1`, maxRetries: 0 });
    const { max_new_tokens: maxTokens } = golden.decoding;
    const results = await Promise.all(golden.cases.map((c) => client.completions.create({
      model: MODEL, prompt: c.prompt, max_tokens: maxTokens, temperature: 0,
    })));
    results.forEach((r, i) => assert.equal(r.choices[0].text, golden.cases[i].generated_text,
      `case ${golden.cases[i].source}`));
    const info = await (await fetch(tp.baseUrl + '/get_server_info')).json();
    assert.equal(info.tp_size, 2);
    // update_weights_from_disk: each rank loads its experts again; the texts stay the reference's.
    const update = await fetch(tp.baseUrl + '/update_weights_from_disk', { method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model_path: path.join(repoRoot, 'models/beam-nano') }) });
    assert.equal(update.status, 200, await update.clone().text());
    assert.equal((await update.json()).success, true);
    const again = await client.completions.create({ model: MODEL, prompt: golden.cases[0].prompt,
      max_tokens: maxTokens, temperature: 0 });
    assert.equal(again.choices[0].text, golden.cases[0].generated_text);
    assert.equal((await (await fetch(server.baseUrl + '/get_server_info')).json()).tp_size, 1);
  } finally {
    assert.equal(await tp.stop(), 0);
  }
});

// The hierarchical cache (SGLang's --enable-hierarchical-cache): KV pools that hold about one
// conversation, so the next ones evict it; asked again, it comes back from host memory (its
// prompt tokens counted as cached) with the text the plain server gives, and /metrics and
// /get_server_info show the host tier.
test('hierarchical cache: an evicted conversation comes back from host memory', async () => {
  const hi = await startServer(['--threads', '2', '--kv-budget-mb', '2', '--block-size', '16',
    '--max-running', '2', '--max-tokens-per-step', '64', '--enable-hierarchical-cache',
    '--hicache-ratio', '8'], { model: 'models/beam-nano', tokenizer: null, name: MODEL });
  try {
    const client = new (await importNodePackage('openai')).default(
      { apiKey: 'unused', baseURL: `${hi.baseUrl}/v1`, maxRetries: 0 });
    const code = 'def scale(values, factor):\n    return [v * factor for v in values]\n\n'.repeat(12);
    const ask = (c, content) => c.chat.completions.create({ model: MODEL,
      messages: [{ role: 'user', content }], max_tokens: 12, temperature: 0 });
    const first = await ask(client, code);
    for (let i = 1; i <= 3; i++) await ask(client, `Tell me about number ${i} and ${code} ${i}`);
    const again = await ask(client, code);
    assert.equal(again.choices[0].message.content, first.choices[0].message.content);
    assert.equal(again.choices[0].message.content, (await ask(openai, code)).choices[0].message.content);
    const prompt = again.usage.prompt_tokens;
    assert.equal(again.usage.prompt_tokens_details.cached_tokens, Math.floor((prompt - 1) / 16) * 16);
    const metrics = await (await fetch(hi.baseUrl + '/metrics')).text();
    const value = (series) => Number(metrics.match(new RegExp(`^${series.replace(/[{}]/g, '\\$&')} (\\S+)$`, 'm'))[1]);
    assert.ok(value('beamserve_hicache_saved_blocks_total{pool="full"}') > 0);
    assert.ok(value('beamserve_hicache_loaded_blocks_total{pool="full"}') > 0);
    assert.ok(value('beamserve_hicache_loaded_blocks_total{pool="sliding"}') > 0);
    assert.ok(value('beamserve_hicache_restored_tokens_total') >= again.usage.prompt_tokens_details.cached_tokens);
    assert.ok(value('beamserve_hicache_blocks{pool="full",state="total"}') > 0);
    const info = await (await fetch(hi.baseUrl + '/get_server_info')).json();
    assert.equal(info.enable_hierarchical_cache, true);
    assert.equal(info.hicache_ratio, 8);
    assert.equal(info.hicache_write_policy, 'write_back');
    assert.equal((await (await fetch(server.baseUrl + '/get_server_info')).json()).enable_hierarchical_cache, false);
  } finally {
    assert.equal(await hi.stop(), 0);
  }
});
