// The official `openai` npm client against a live beamserve (tiny-beam + the tiny-chat fixture
// tokenizer): chat (plain, streaming, n > 1, logprobs, tool-call round trip), completions and
// responses (plain and streaming events), echo and prompt logprobs (scoring), structured output
// (response_format / text.format: every output of the random model is JSON of the schema; the
// regex, choice and GBNF / Lark grammar fields: every output matches whole). Checks structure and
// content, not only that calls work; embeddings (base64 as the SDK asks, and floats).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, importNodePackage, Tok, forceOneToken } from './lib/harness.mjs';

let server;
let client;
const MODEL = 'tiny-chat';
const weatherTool = {
  type: 'function',
  function: {
    name: 'get_weather', description: 'Weather for a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};
// Keeps greedy output ASCII (bytes >= 0x80 are ids 131..258), so token bytes concatenate to the text.
const asciiOnly = Object.fromEntries(Array.from({ length: 128 }, (_, i) => [String(131 + i), -100]));

before(async () => {
  server = await startServer();
  const { default: OpenAI } = await importNodePackage('openai');
  client = new OpenAI({ apiKey: 'unused', baseURL: `${server.baseUrl}/v1`, maxRetries: 0 });
});

after(async () => {
  assert.equal(await server.stop(), 0);
});

test('models list names the served model', async () => {
  const page = await client.models.list();
  assert.deepEqual(page.data.map((m) => m.id), [MODEL]);
  const m = await client.models.retrieve(MODEL);
  assert.equal(m.object, 'model');
});

test('chat: plain greedy completion with usage', async () => {
  const r = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 12, temperature: 0,
    ignore_eos: true,
  });
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices.length, 1);
  const c = r.choices[0];
  assert.equal(c.message.role, 'assistant');
  assert.equal(typeof c.message.content, 'string');
  assert.equal(c.finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 12);
  assert.ok(r.usage.prompt_tokens > 5);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.ok(r.usage.prompt_tokens_details.cached_tokens >= 0);
  // The same request again: identical greedy text, and the prompt prefix now comes from the cache.
  const again = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 12, temperature: 0,
    ignore_eos: true,
  });
  assert.equal(again.choices[0].message.content, c.message.content);
});

test('chat: streamed text equals non-streamed text; include_usage sends a final usage chunk', async () => {
  const req = {
    model: MODEL, messages: [{ role: 'user', content: 'Tell me about the weather' }], max_tokens: 20,
    temperature: 0, ignore_eos: true,
  };
  const plain = await client.chat.completions.create(req);
  const stream = await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let roleSeen = false;
  let finish = null;
  let usage = null;
  let chunksAfterUsage = 0;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (usage) chunksAfterUsage++;
    if (chunk.usage) {
      usage = chunk.usage;
      assert.deepEqual(chunk.choices, []);
      continue;
    }
    const ch = chunk.choices[0];
    if (ch.delta.role) roleSeen = true;
    if (ch.delta.content) text += ch.delta.content;
    if (ch.finish_reason) finish = ch.finish_reason;
  }
  assert.ok(roleSeen);
  assert.equal(finish, 'length');
  assert.equal(text, plain.choices[0].message.content);
  assert.equal(chunksAfterUsage, 0);
  assert.equal(usage.completion_tokens, 20);
  assert.equal(usage.prompt_tokens, plain.usage.prompt_tokens);
  assert.equal(usage.total_tokens, usage.prompt_tokens + 20);
});

test('chat: n > 1 with a seed gives n choices and usage sums them', async () => {
  const r = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'Pick a word' }], max_tokens: 6, n: 3, seed: 7,
    temperature: 1, ignore_eos: true,
  });
  assert.deepEqual(r.choices.map((c) => c.index).sort(), [0, 1, 2]);
  for (const c of r.choices) assert.equal(c.finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 18);
  // Same seed, same choices.
  const again = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'Pick a word' }], max_tokens: 6, n: 3, seed: 7,
    temperature: 1, ignore_eos: true,
  });
  assert.deepEqual(again.choices.map((c) => c.message.content), r.choices.map((c) => c.message.content));
  // Streaming n > 1: every index gets its own finish chunk and the texts match.
  const stream = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'Pick a word' }], max_tokens: 6, n: 3, seed: 7,
    temperature: 1, ignore_eos: true, stream: true,
  });
  const texts = ['', '', ''];
  const finishes = [null, null, null];
  for await (const chunk of stream) {
    for (const ch of chunk.choices) {
      texts[ch.index] += ch.delta.content ?? '';
      if (ch.finish_reason) finishes[ch.index] = ch.finish_reason;
    }
  }
  assert.deepEqual(finishes, ['length', 'length', 'length']);
  assert.deepEqual(texts, r.choices.map((c) => c.message.content));
});

test('chat: logprobs with top_logprobs are consistent with the text and usage', async () => {
  const r = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 8, temperature: 0,
    logprobs: true, top_logprobs: 3, ignore_eos: true, logit_bias: asciiOnly,
  });
  const entries = r.choices[0].logprobs.content;
  assert.equal(entries.length, r.usage.completion_tokens);
  let bytes = [];
  for (const e of entries) {
    assert.ok(e.logprob <= 0);
    assert.equal(e.top_logprobs.length, 3);
    for (let i = 1; i < 3; i++) assert.ok(e.top_logprobs[i - 1].logprob >= e.top_logprobs[i].logprob);
    // Logprobs are taken before logit_bias; the chosen token is greedy over biased logits, so it is
    // the most likely ASCII token: at most the best alternative, at least the third... so just >=.
    assert.ok(e.logprob <= e.top_logprobs[0].logprob + 1e-6);
    bytes = bytes.concat(e.bytes);
  }
  assert.equal(Buffer.from(bytes).toString('utf8'), r.choices[0].message.content);
  // Streaming delivers the same entries.
  const stream = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 8, temperature: 0,
    logprobs: true, top_logprobs: 3, ignore_eos: true, logit_bias: asciiOnly, stream: true,
  });
  const streamed = [];
  for await (const chunk of stream) {
    for (const ch of chunk.choices) if (ch.logprobs?.content) streamed.push(...ch.logprobs.content);
  }
  assert.deepEqual(streamed.map((e) => [e.token, e.logprob]), entries.map((e) => [e.token, e.logprob]));
});

test('chat: stop strings cut the text and finish with stop', async () => {
  const base = { model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 30, temperature: 0,
    ignore_eos: true, logit_bias: asciiOnly };
  const full = (await client.chat.completions.create(base)).choices[0].message.content;
  assert.ok(full.length >= 10);
  const stop = full.slice(4, 6);
  const cut = full.slice(0, full.indexOf(stop));
  const r = await client.chat.completions.create({ ...base, stop: [stop] });
  assert.equal(r.choices[0].message.content, cut);
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.ok(r.usage.completion_tokens <= 30);
  const stream = await client.chat.completions.create({ ...base, stop: [stop], stream: true });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  assert.equal(text, cut);
});

test('chat: tool-call round trip', async () => {
  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const r = await client.chat.completions.create({
    model: MODEL, messages, tools: [weatherTool], max_tokens: 5, ...forceOneToken(Tok.TOOL_CALL),
  });
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'tool_calls');
  assert.equal(c.message.content, null);
  assert.equal(c.message.tool_calls.length, 1);
  const call = c.message.tool_calls[0];
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'get_weather');
  assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Paris' });
  assert.match(call.id, /^call_/);
  assert.equal(r.usage.completion_tokens, 2);  // the tool-call token and the eos

  // Streaming: the name arrives once with the id, then the arguments.
  const stream = await client.chat.completions.create({
    model: MODEL, messages, tools: [weatherTool], max_tokens: 5, stream: true, ...forceOneToken(Tok.TOOL_CALL),
  });
  const calls = {};
  let finish = null;
  for await (const chunk of stream) {
    const ch = chunk.choices[0];
    if (!ch) continue;
    for (const tc of ch.delta.tool_calls ?? []) {
      calls[tc.index] ??= { id: '', name: '', args: '' };
      if (tc.id) calls[tc.index].id = tc.id;
      if (tc.function?.name) calls[tc.index].name += tc.function.name;
      if (tc.function?.arguments) calls[tc.index].args += tc.function.arguments;
    }
    if (ch.finish_reason) finish = ch.finish_reason;
  }
  assert.equal(finish, 'tool_calls');
  assert.equal(calls[0].name, 'get_weather');
  assert.deepEqual(JSON.parse(calls[0].args), { city: 'Paris' });

  // Second turn: the assistant's call and the tool result go back; the model answers in text.
  messages.push(c.message, { role: 'tool', tool_call_id: call.id, content: '{"temperature": 21}' });
  const second = await client.chat.completions.create({
    model: MODEL, messages, tools: [weatherTool], max_tokens: 6, temperature: 0, ignore_eos: true,
    logit_bias: { [Tok.TOOL_CALL]: -100 },
  });
  assert.equal(second.choices[0].finish_reason, 'length');
  assert.equal(second.choices[0].message.tool_calls, undefined);
  // The second prompt holds the first prompt's tokens plus the call and the tool result.
  assert.ok(second.usage.prompt_tokens > r.usage.prompt_tokens);
  assert.ok(second.usage.prompt_tokens_details.cached_tokens >= 0);
});

test('chat: tool_choice none returns the call text as content; named needs a known function', async () => {
  const r = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'weather?' }], tools: [weatherTool], tool_choice: 'none',
    max_tokens: 5, ...forceOneToken(Tok.TOOL_CALL),
  });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(r.choices[0].message.tool_calls, undefined);
  assert.match(r.choices[0].message.content, /get_weather/);
  await assert.rejects(client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'x' }], tools: [weatherTool], max_tokens: 2,
    tool_choice: { type: 'function', function: { name: 'nope' } },
  }), (e) => e.status === 400 && e.param === 'tool_choice');
  // A named function opens the assistant turn with the tool-call delimiter; output stays a call.
  const named = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'x' }], tools: [weatherTool], max_tokens: 3, temperature: 0,
    ignore_eos: true, tool_choice: { type: 'function', function: { name: 'get_weather' } },
  });
  assert.equal(named.choices[0].finish_reason, 'length');
  assert.equal(named.usage.completion_tokens, 3);
});

test('chat: reasoning goes to reasoning_content', async () => {
  const r = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'weather?' }], max_tokens: 5,
    ...forceOneToken(Tok.THINK_ANSWER),
  });
  const m = r.choices[0].message;
  assert.equal(m.reasoning_content, 'The user asks about the weather.');
  assert.equal(m.content, 'It is sunny in Paris.');
  const stream = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'weather?' }], max_tokens: 5, stream: true,
    ...forceOneToken(Tok.THINK_ANSWER),
  });
  let reasoning = '';
  let content = '';
  for await (const chunk of stream) {
    reasoning += chunk.choices[0]?.delta?.reasoning_content ?? '';
    content += chunk.choices[0]?.delta?.content ?? '';
  }
  assert.equal(reasoning, m.reasoning_content);
  assert.equal(content, m.content);
});

// A schema every output of which ends within a few hundred tokens, so the random tiny model's
// outputs must complete: the masks alone make them JSON of the schema.
const boundedSchema = {
  type: 'object',
  properties: {
    ok: { type: 'boolean' },
    size: { enum: ['s', 'm', 'l'] },
    count: { type: 'integer', minimum: -3, maximum: 250 },
    tags: { type: 'array', items: { enum: ['a', 'b'] }, maxItems: 2 },
    note: { type: ['string', 'null'], maxLength: 4 },
    code: { type: 'string', pattern: '^[A-Z]{2}-\\d{1,3}$' },
    score: { type: 'number', exclusiveMinimum: 0.25, maximum: 2.5 },
  },
  required: ['ok', 'size', 'count', 'tags', 'note', 'code', 'score'],
};
const schemaFormat = { type: 'json_schema', json_schema: { name: 'item', strict: true, schema: boundedSchema } };

function checkBounded(text) {
  const v = JSON.parse(text);
  assert.deepEqual(Object.keys(v), ['ok', 'size', 'count', 'tags', 'note', 'code', 'score'], text);
  assert.equal(typeof v.ok, 'boolean');
  assert.ok(['s', 'm', 'l'].includes(v.size));
  assert.ok(Number.isInteger(v.count) && v.count >= -3 && v.count <= 250, text);
  assert.ok(Array.isArray(v.tags) && v.tags.length <= 2 && v.tags.every((t) => t === 'a' || t === 'b'));
  assert.ok(v.note === null || (typeof v.note === 'string' && [...v.note].length <= 4));
  assert.match(v.code, /^[A-Z]{2}-\d{1,3}$/);
  assert.ok(typeof v.score === 'number' && v.score > 0.25 && v.score <= 2.5, text);
}

test('chat: response_format json_schema makes every choice JSON of the schema', async () => {
  const r = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'An item, please' }], max_tokens: 400, temperature: 1,
    seed: 5, n: 3, response_format: schemaFormat, chat_template_kwargs: { enable_thinking: false },
  });
  assert.equal(r.choices.length, 3);
  for (const c of r.choices) {
    assert.equal(c.finish_reason, 'stop');
    checkBounded(c.message.content);
  }
  // Streamed, the same seed gives the same text.
  const stream = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'An item, please' }], max_tokens: 400, temperature: 1,
    seed: 5, n: 3, response_format: schemaFormat, chat_template_kwargs: { enable_thinking: false }, stream: true,
  });
  const texts = ['', '', ''];
  for await (const chunk of stream) {
    for (const c of chunk.choices) texts[c.index] += c.delta?.content ?? '';
  }
  assert.deepEqual(texts, r.choices.map((c) => c.message.content));
});

test('chat: a model that thinks may reason before the JSON', async () => {
  // No enable_thinking=false: the prompt ends at the assistant header, so the first token may be
  // <think> (pushed by logit_bias), the reasoning is free until </think>, and the JSON follows.
  const r = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'An item, please' }], max_tokens: 400, temperature: 0,
    logit_bias: { 505: 50, 506: 100 }, response_format: schemaFormat,
  });
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'stop');
  checkBounded(c.message.content);
  assert.ok(!c.message.content.includes('think'));
});

test('responses and completions: structured output formats', async () => {
  const r = await client.responses.create({
    model: MODEL, input: 'An item, please', max_output_tokens: 400, temperature: 0.7, seed: 1,
    text: { format: { type: 'json_schema', name: 'item', schema: boundedSchema } },
    chat_template_kwargs: { enable_thinking: false },
  });
  assert.equal(r.status, 'completed');
  checkBounded(r.output_text);
  assert.deepEqual(r.text.format, { type: 'json_schema', name: 'item', schema: boundedSchema });
  const c = await client.completions.create({
    model: MODEL, prompt: 'Answer:', max_tokens: 20, temperature: 1, seed: 2,
    response_format: { type: 'json_schema', json_schema: { name: 'yn', schema: { enum: ['yes', 'no'] } } },
  });
  assert.equal(c.choices[0].finish_reason, 'stop');
  assert.ok(['yes', 'no'].includes(JSON.parse(c.choices[0].text)), c.choices[0].text);
});

test("vLLM's guided_choice / guided_regex / guided_grammar / structured_outputs, SGLang's regex / "
  + "ebnf and llama.cpp's grammar", async () => {
  const colors = ['red', 'green', 'light blue'];
  const c = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'A color' }], max_tokens: 20, temperature: 1,
    seed: 3, n: 3, guided_choice: colors, chat_template_kwargs: { enable_thinking: false },
  });
  for (const ch of c.choices) {
    assert.equal(ch.finish_reason, 'stop');
    assert.ok(colors.includes(ch.message.content), ch.message.content);
  }
  for (const extra of [{ guided_regex: '[A-Z]{3}-\\d{2}' }, { regex: '[A-Z]{3}-\\d{2}' },
    { structured_outputs: { regex: '[A-Z]{3}-\\d{2}' } }]) {
    const r = await client.completions.create({
      model: MODEL, prompt: 'Code:', max_tokens: 20, temperature: 1, seed: 4, ...extra,
    });
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.match(r.choices[0].text, /^[A-Z]{3}-\d{2}$/);
  }
  // GBNF grammars: every field constrains the whole output, which ends only once it is complete.
  const yesNo = 'root ::= ("yes" | "no") " " [0-9]{1,3}';
  // The same in Lark (vLLM reads a grammar without `::=` as Lark).
  const yesNoLark = 'start: answer " " /[0-9]{1,3}/\nanswer: "yes" | "no"';
  for (const extra of [{ guided_grammar: yesNo }, { ebnf: yesNo },
    { structured_outputs: { grammar: yesNo } }, { grammar: yesNo },
    { guided_grammar: yesNoLark }, { structured_outputs: { grammar: yesNoLark } }]) {
    const r = await client.completions.create({
      model: MODEL, prompt: 'Answer:', max_tokens: 20, temperature: 1, seed: 5, ...extra,
    });
    assert.equal(r.choices[0].finish_reason, 'stop', JSON.stringify(extra));
    assert.match(r.choices[0].text, /^(yes|no) [0-9]{1,3}$/);
  }
  // A recursive grammar (balanced parentheses around x), three samples.
  const nested = await client.completions.create({
    model: MODEL, prompt: 'Nest:', max_tokens: 60, temperature: 1, seed: 6, n: 3,
    guided_grammar: 'root ::= "(" root ")" | "x"',
  });
  assert.equal(nested.choices.length, 3);
  for (const ch of nested.choices) {
    assert.equal(ch.finish_reason, 'stop', ch.text);
    assert.match(ch.text, /^\(*x\)*$/);
    const depth = ch.text.indexOf('x');
    assert.equal(ch.text.length, 2 * depth + 1, ch.text);  // as many ')' as '(' before the x
  }
  // The random model all but always writes the x at once; a bias towards '(' (id 43) nests it
  // deeper. Every output is then balanced when it stops, and a prefix of a balanced one when
  // max_tokens cuts it.
  const deep = await client.completions.create({
    model: MODEL, prompt: 'Nest:', max_tokens: 60, temperature: 1, seed: 1, n: 8,
    guided_grammar: 'root ::= "(" root ")" | "x"', logit_bias: { 43: 19 },
  });
  let deepest = 0;
  for (const ch of deep.choices) {
    const m = /^(\(*)(x?)(\)*)$/.exec(ch.text);
    assert.ok(m && m[3].length <= m[1].length && (m[2] || !m[3]), ch.text);
    if (ch.finish_reason === 'length') continue;
    assert.equal(ch.finish_reason, 'stop');
    assert.ok(m[2] && m[3].length === m[1].length, ch.text);
    deepest = Math.max(deepest, m[1].length);
  }
  assert.ok(deepest >= 2, JSON.stringify(deep.choices.map((ch) => ch.text)));
  const g = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'Yes or no?' }], max_tokens: 20,
    temperature: 1, seed: 7, n: 2, guided_grammar: yesNo,
    chat_template_kwargs: { enable_thinking: false },
  });
  for (const ch of g.choices) {
    assert.equal(ch.finish_reason, 'stop');
    assert.match(ch.message.content, /^(yes|no) [0-9]{1,3}$/);
  }
  await assert.rejects(client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 2,
    guided_grammar: 'root ::= ("a"',
  }), (e) => e.status === 400 && e.param === 'guided_grammar' &&
    /cannot be enforced/.test(e.message));
  await assert.rejects(client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 2,
    guided_regex: 'a', guided_grammar: yesNo,
  }), (e) => e.status === 400 && e.param === 'guided_grammar');
  await assert.rejects(client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 2,
    response_format: { type: 'json_object' }, guided_regex: 'a',
  }), (e) => e.status === 400 && e.param === 'guided_regex');
});

test('chat: a structural tag lets free text hold calls whose arguments match the schema', async () => {
  // Every '<' (id 63, pushed by logit_bias) starts a call: `<get>`, JSON of the schema, `</get>`.
  const format = {
    type: 'structural_tag', format: {
      type: 'triggered_tags', triggers: ['<'], tags: [{
        begin: '<get>', end: '</get>', content: { type: 'json_schema', json_schema: {
          type: 'object', properties: { id: { type: 'integer', minimum: 0, maximum: 99 } },
          required: ['id'], additionalProperties: false } },
      }],
    },
  };
  const r = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'Call it' }], max_tokens: 80, temperature: 1,
    seed: 2, n: 4, response_format: format, logit_bias: { ...asciiOnly, 63: 25 },
    chat_template_kwargs: { enable_thinking: false },
  });
  let calls = 0;
  for (const ch of r.choices) {
    const text = ch.message.content;
    const rest = text.replace(/<get>(.*?)<\/get>/gs, (_, args) => {
      const parsed = JSON.parse(args);
      assert.deepEqual(Object.keys(parsed), ['id'], args);
      assert.ok(Number.isInteger(parsed.id) && parsed.id >= 0 && parsed.id <= 99, args);
      ++calls;
      return '';
    });
    // Outside the calls no '<', except where a call max_tokens cut short begins.
    const open = rest.indexOf('<');
    if (ch.finish_reason === 'stop') assert.equal(open, -1, text);
    else if (open >= 0) assert.match(rest.slice(open), /^<(g(e(t(>.*)?)?)?)?$/s, text);
  }
  assert.ok(calls >= 2, JSON.stringify(r.choices.map((ch) => ch.message.content)));
  await assert.rejects(client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 2,
    response_format: { type: 'structural_tag', format: { type: 'tag', begin: '<a>', end: '</a>' } },
  }), (e) => e.status === 400 && e.param === 'response_format' &&
    /'format.content': is required/.test(e.message));
});

test('chat: response formats that cannot be enforced are clear 400s', async () => {
  await assert.rejects(client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 2,
    response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'number', minimum: 1e-7 } } },
  }), (e) => e.status === 400 && /minimum.*6 decimals/.test(e.message) &&
    e.param === 'response_format.json_schema.schema');
  await assert.rejects(client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 2, ignore_eos: true,
    response_format: { type: 'json_object' },
  }), (e) => e.status === 400 && /ignore_eos/.test(e.message));
  await assert.rejects(client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 2,
    response_format: { type: 'yaml' },
  }), (e) => e.status === 400 && e.param === 'response_format.type');
});

test('completions: text, logprobs, streaming', async () => {
  const r = await client.completions.create({
    model: MODEL, prompt: 'The weather in Paris', max_tokens: 10, temperature: 0, logprobs: 2, ignore_eos: true,
    logit_bias: asciiOnly,
  });
  assert.equal(r.object, 'text_completion');
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'length');
  assert.equal(c.logprobs.tokens.length, 10);
  assert.equal(c.logprobs.tokens.join(''), c.text);
  assert.equal(c.logprobs.top_logprobs[0] && Object.keys(c.logprobs.top_logprobs[0]).length <= 2, true);
  assert.equal(r.usage.completion_tokens, 10);
  const stream = await client.completions.create({
    model: MODEL, prompt: 'The weather in Paris', max_tokens: 10, temperature: 0, ignore_eos: true,
    logit_bias: asciiOnly, stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    text += chunk.choices[0]?.text ?? '';
  }
  assert.equal(text, c.text);
  assert.equal(usage.completion_tokens, 10);
  // Token-id prompts work too.
  const ids = await client.completions.create({ model: MODEL, prompt: [Tok.HELLO, 40, 41], max_tokens: 3,
    temperature: 0, ignore_eos: true });
  assert.equal(ids.usage.prompt_tokens, 3);
});

test('responses: plain, with reasoning and a function call item', async () => {
  const r = await client.responses.create({
    model: MODEL, input: 'Hello there', max_output_tokens: 8, temperature: 0, ignore_eos: true,
  });
  assert.equal(r.object, 'response');
  assert.equal(r.status, 'incomplete');
  assert.equal(r.incomplete_details.reason, 'max_output_tokens');
  assert.equal(r.usage.output_tokens, 8);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + 8);
  const msg = r.output.find((o) => o.type === 'message');
  assert.equal(r.output_text, msg.content[0].text);

  const think = await client.responses.create({
    model: MODEL, input: [{ role: 'user', content: 'weather?' }], max_output_tokens: 5,
    ...forceOneToken(Tok.THINK_ANSWER),
  });
  assert.equal(think.status, 'completed');
  assert.deepEqual(think.output.map((o) => o.type), ['reasoning', 'message']);
  assert.equal(think.output[0].content[0].text, 'The user asks about the weather.');
  assert.equal(think.output_text, 'It is sunny in Paris.');

  const tool = { type: 'function', name: 'get_weather', parameters: weatherTool.function.parameters };
  const call = await client.responses.create({
    model: MODEL, input: 'weather in Paris?', tools: [tool], max_output_tokens: 5, ...forceOneToken(Tok.TOOL_CALL),
  });
  const fc = call.output.find((o) => o.type === 'function_call');
  assert.equal(fc.name, 'get_weather');
  assert.deepEqual(JSON.parse(fc.arguments), { city: 'Paris' });
  // Round trip: the call and its output go back as input items.
  const next = await client.responses.create({
    model: MODEL, tools: [tool], max_output_tokens: 4, temperature: 0, ignore_eos: true,
    input: [{ role: 'user', content: 'weather in Paris?' }, fc,
      { type: 'function_call_output', call_id: fc.call_id, output: '{"temperature": 21}' }],
  });
  assert.equal(next.usage.output_tokens, 4);
});

test('responses: streaming events arrive in order and rebuild the same response', async () => {
  const req = { model: MODEL, input: [{ role: 'user', content: 'weather?' }], max_output_tokens: 5,
    ...forceOneToken(Tok.THINK_ANSWER) };
  const plain = await client.responses.create(req);
  const stream = await client.responses.create({ ...req, stream: true });
  const types = [];
  let seq = -1;
  let text = '';
  let reasoning = '';
  let completed = null;
  for await (const ev of stream) {
    types.push(ev.type);
    assert.equal(ev.sequence_number, seq + 1);
    seq = ev.sequence_number;
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.reasoning_text.delta') reasoning += ev.delta;
    if (ev.type === 'response.completed') completed = ev.response;
  }
  assert.equal(types[0], 'response.created');
  assert.equal(types[1], 'response.in_progress');
  assert.equal(types.at(-1), 'response.completed');
  for (const t of ['response.output_item.added', 'response.content_part.added', 'response.output_text.done',
    'response.content_part.done', 'response.output_item.done', 'response.reasoning_text.done']) {
    assert.ok(types.includes(t), t);
  }
  assert.equal(text, plain.output_text);
  assert.equal(reasoning, plain.output[0].content[0].text);
  assert.deepEqual(completed.output.map((o) => o.type), plain.output.map((o) => o.type));
  assert.equal(completed.usage.output_tokens, plain.usage.output_tokens);

  // The SDK's stream helper accumulates the same final response.
  const helper = client.responses.stream(req);
  const final = await helper.finalResponse();
  assert.equal(final.output_text, plain.output_text);

  // A function call streams as output_item.added + arguments delta/done.
  const tool = { type: 'function', name: 'get_weather', parameters: weatherTool.function.parameters };
  const fstream = await client.responses.create({ model: MODEL, input: 'weather?', tools: [tool],
    max_output_tokens: 5, stream: true, ...forceOneToken(Tok.TOOL_CALL) });
  let args = '';
  let doneArgs = null;
  for await (const ev of fstream) {
    if (ev.type === 'response.function_call_arguments.delta') args += ev.delta;
    if (ev.type === 'response.function_call_arguments.done') doneArgs = ev.arguments;
  }
  assert.deepEqual(JSON.parse(args), { city: 'Paris' });
  assert.equal(doneArgs, args);
});

test('errors surface as OpenAI APIErrors with status and param', async () => {
  await assert.rejects(client.chat.completions.create({ model: 'gpt-nope', messages: [{ role: 'user', content: 'x' }] }),
    (e) => e.status === 404 && e.code === 'model_not_found');
  await assert.rejects(client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'x' }], top_p: 3 }),
    (e) => e.status === 400 && e.param === 'top_p');
  await assert.rejects(client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'x' }], n: 500 }),
    (e) => e.status === 400 && e.param === 'n');
});

test('chat: a required or named tool call is JSON of the tool\'s parameters', async () => {
  const forecast = {
    type: 'function',
    function: {
      name: 'forecast', description: 'Forecast',
      parameters: {
        type: 'object', properties: { unit: { enum: ['c', 'f'] }, days: { type: 'integer' } },
        required: ['unit', 'days'],
      },
    },
  };
  const alarm = {
    type: 'function',
    function: {
      name: 'alarm', parameters: { type: 'object', properties: { on: { type: 'boolean' } }, required: ['on'] },
    },
  };
  const named = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'Weather?' }], max_tokens: 200, temperature: 1, seed: 4,
    tools: [forecast, alarm], tool_choice: { type: 'function', function: { name: 'forecast' } },
  });
  // A named function is called once and the turn ends there: no text after the call.
  const call = named.choices[0].message.tool_calls[0];
  assert.equal(named.choices[0].finish_reason, 'tool_calls');
  assert.equal(named.choices[0].message.tool_calls.length, 1);
  assert.equal(named.choices[0].message.content, null);
  assert.equal(call.function.name, 'forecast');
  const args = JSON.parse(call.function.arguments);
  assert.ok(['c', 'f'].includes(args.unit) && Number.isInteger(args.days), call.function.arguments);
  // parallel_tool_calls: false makes a required turn exactly one call, whatever the seed.
  const single = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'Weather?' }], max_tokens: 200, temperature: 1, seed: 5,
    n: 4, tools: [forecast, alarm], tool_choice: 'required', parallel_tool_calls: false,
  });
  for (const c of single.choices) {
    assert.equal(c.finish_reason, 'tool_calls');
    assert.equal(c.message.tool_calls.length, 1);
    assert.equal(c.message.content, null);
  }
  const required = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'Weather?' }], max_tokens: 200, temperature: 1, seed: 9,
    n: 3, tools: [forecast, alarm], tool_choice: 'required',
  });
  for (const c of required.choices) {
    const f = c.message.tool_calls[0].function;
    assert.ok(['forecast', 'alarm'].includes(f.name));
    const a = JSON.parse(f.arguments);
    if (f.name === 'alarm') assert.equal(typeof a.on, 'boolean');
    else assert.ok(['c', 'f'].includes(a.unit) && Number.isInteger(a.days));
  }
  // A string argument never holds the call's delimiter tokens (tiny-chat's <tool_call> and
  // </tool_call> are text tokens too): each call parses, unless the limit cut it.
  const strings = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'Weather?' }], max_tokens: 300, temperature: 1,
    seed: 4, n: 8, tools: [weatherTool], tool_choice: { type: 'function', function: { name: 'get_weather' } },
  });
  for (const c of strings.choices) {
    if (c.finish_reason === 'length') continue;
    assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c.message));
    assert.equal(typeof JSON.parse(c.message.tool_calls[0].function.arguments).city, 'string');
  }
  assert.ok(strings.choices.filter((c) => c.finish_reason === 'tool_calls').length >= 4);
  // A response_format beside a required call is refused (the call follows its tool's schema).
  await assert.rejects(client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 5, tools: [alarm],
    tool_choice: 'required', response_format: { type: 'json_object' },
  }), (e) => e.status === 400 && e.param === 'response_format');
});

// Scoring through the SDK: legacy echo + logprobs (lm-evaluation-harness's local-completions
// payload), vLLM's prompt_logprobs as an extra body field, prompt lists, streaming echo.
test('completions: echo scores a continuation; prompt lists; streamed echo', async () => {
  const ctx = [Tok.HELLO, 40, 41, 42, 43, 44];
  const genRes = await fetch(`${server.baseUrl}/generate`, { method: 'POST', body: JSON.stringify({
    input_ids: ctx, max_tokens: 4, temperature: 0, ignore_eos: true, logprobs: true }) });
  const gen = (await genRes.json()).choices[0];
  const r = await client.completions.create({
    model: MODEL, prompt: [[...ctx, ...gen.token_ids], ctx], max_tokens: 1, logprobs: 1, temperature: 0, seed: 1234,
    echo: true,
  });
  assert.equal(r.choices.length, 2);
  const [scored, bare] = [...r.choices].sort((a, b) => a.index - b.index);
  assert.equal(scored.logprobs.token_logprobs[0], null);
  assert.equal(scored.logprobs.top_logprobs[0], null);
  const lp = scored.logprobs.token_logprobs.slice(ctx.length, -1);
  assert.equal(lp.length, 4);
  lp.forEach((v, i) => assert.ok(Math.abs(v - gen.logprobs[i].logprob) <= 1e-4, `${v} vs ${gen.logprobs[i].logprob}`));
  // Greedy tokens: each is the top-1 alternative, as the harness's is_greedy checks.
  scored.logprobs.top_logprobs.slice(ctx.length, -1).forEach((top, i) => assert.equal(Math.max(...Object.values(top)), lp[i]));
  // The context's own scores agree between the two prompts (same positions, same model).
  assert.deepEqual(bare.logprobs.token_logprobs.slice(0, ctx.length),
    scored.logprobs.token_logprobs.slice(0, ctx.length));
  assert.equal(r.usage.prompt_tokens, 2 * ctx.length + 4);
  assert.equal(r.usage.completion_tokens, 2);

  const text = 'The weather in Paris';
  const stream = await client.completions.create({ model: MODEL, prompt: text, max_tokens: 3, temperature: 0,
    ignore_eos: true, echo: true, stream: true });
  let streamed = '';
  let first = null;
  for await (const chunk of stream) {
    first ??= chunk.choices[0]?.text;
    streamed += chunk.choices[0]?.text ?? '';
  }
  assert.ok(first.startsWith(text));
  const whole = await client.completions.create({ model: MODEL, prompt: text, max_tokens: 3, temperature: 0,
    ignore_eos: true, echo: true });
  assert.equal(streamed, whole.choices[0].text);
  const only = await client.completions.create({ model: MODEL, prompt: text, max_tokens: 0, echo: true });
  assert.equal(only.choices[0].text, text);
  assert.equal(only.choices[0].finish_reason, 'length');
  assert.equal(only.usage.completion_tokens, 0);
});

test("vLLM's prompt_logprobs through the SDK (completions and chat), and its 400s", async () => {
  const c = await client.completions.create({ model: MODEL, prompt: 'Hello world', max_tokens: 2, temperature: 0,
    prompt_logprobs: 2 });
  const plp = c.choices[0].prompt_logprobs;
  assert.equal(plp.length, c.usage.prompt_tokens);
  assert.equal(plp[0], null);
  for (const entry of plp.slice(1)) {
    const values = Object.values(entry);
    assert.ok(values.length === 2 || values.length === 3);
    assert.deepEqual(values.map((v) => v.rank).filter((k) => k <= 2).sort(), [1, 2]);
    for (const v of values) assert.ok(typeof v.logprob === 'number' && typeof v.decoded_token === 'string');
  }
  const chat = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }],
    max_tokens: 1, prompt_logprobs: 0 });
  assert.equal(chat.prompt_logprobs.length, chat.usage.prompt_tokens);
  assert.ok(chat.prompt_logprobs.slice(1).every((e) => Object.keys(e).length === 1));
  await assert.rejects(client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'x' }],
    prompt_logprobs: 1, stream: true }), (e) => e.status === 400 && e.param === 'prompt_logprobs');
  await assert.rejects(client.completions.create({ model: MODEL, prompt: 'x', prompt_logprobs: 99 }),
    (e) => e.status === 400 && e.param === 'prompt_logprobs');
  await assert.rejects(client.completions.create({ model: MODEL, prompt: 'x', echo: true, suffix: 'y' }),
    (e) => e.status === 400 && e.param === 'suffix');
  await assert.rejects(client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 0 }),
    (e) => e.status === 400 && e.param === 'max_tokens');
});

// The SDK asks for base64 unless told otherwise and decodes it to floats: both forms agree, and
// each vector has unit length.
test('embeddings through the SDK (base64 by default, and floats)', async () => {
  const packed = await client.embeddings.create({ model: MODEL, input: ['hello', 'world'] });
  assert.equal(packed.data.length, 2);
  const floats = await client.embeddings.create({ model: MODEL, input: ['hello', 'world'],
    encoding_format: 'float' });
  for (let i = 0; i < 2; ++i) {
    assert.equal(packed.data[i].index, i);
    assert.deepEqual(Array.from(packed.data[i].embedding), floats.data[i].embedding.map(Math.fround));
    assert.ok(Math.abs(Math.hypot(...floats.data[i].embedding) - 1) < 1e-5);
  }
  assert.notDeepEqual(floats.data[0].embedding, floats.data[1].embedding);
  assert.equal(packed.usage.prompt_tokens, floats.usage.prompt_tokens);
});

// vLLM's return_token_ids (as RL frameworks read it: prime-rl / verifiers, NeMo Gym): the prompt's
// ids and each choice's output ids beside the text; streamed, every chunk carries its own ids and
// they add up to the non-streamed ones, also while the tool-call parser holds text back; with
// stream_options.continuous_usage_stats every chunk carries its choice's usage so far.
test('return_token_ids on chat and completions, streamed chunks adding up', async () => {
  const messages = [{ role: 'user', content: 'Weather?' }];
  const tokenize = await fetch(`${server.baseUrl}/tokenize`, { method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages, add_generation_prompt: true }) });
  const promptIds = (await tokenize.json()).tokens;
  const collect = async (stream) => {
    const ids = new Map();
    let prompt = null;
    let usage = null;
    for await (const chunk of stream) {
      if (chunk.prompt_token_ids) prompt = chunk.prompt_token_ids;
      if (chunk.choices.length === 0) {
        usage = chunk.usage;
        continue;
      }
      const ch = chunk.choices[0];
      if (ch.prompt_token_ids) prompt = ch.prompt_token_ids;
      assert.ok(Array.isArray(ch.token_ids), JSON.stringify(chunk));
      ids.set(ch.index, (ids.get(ch.index) ?? []).concat(ch.token_ids));
      if (chunk.usage) assert.equal(chunk.usage.completion_tokens, ids.get(ch.index).length);
    }
    return { ids, prompt, usage };
  };
  const plainReq = { model: MODEL, messages, max_tokens: 12, temperature: 0, ignore_eos: true,
    return_token_ids: true };
  const plain = await client.chat.completions.create(plainReq);
  assert.deepEqual(plain.prompt_token_ids, promptIds);
  assert.equal(plain.choices[0].token_ids.length, 12);
  assert.equal(plain.usage.completion_tokens, 12);
  const streamed = await collect(await client.chat.completions.create({ ...plainReq, stream: true,
    stream_options: { include_usage: true, continuous_usage_stats: true } }));
  assert.deepEqual(streamed.prompt, promptIds);
  assert.deepEqual(streamed.ids.get(0), plain.choices[0].token_ids);
  assert.equal(streamed.usage.completion_tokens, 12);
  // A forced tool call (the parser buffers the call's text): the ids still add up.
  const forecastTool = { type: 'function', function: { name: 'forecast', parameters: {
    type: 'object', properties: { unit: { enum: ['c', 'f'] }, days: { type: 'integer' } },
    required: ['unit', 'days'] } } };
  const toolReq = { model: MODEL, messages, max_tokens: 200, temperature: 1, seed: 4,
    tools: [forecastTool], tool_choice: { type: 'function', function: { name: 'forecast' } },
    return_token_ids: true };
  const call = await client.chat.completions.create(toolReq);
  assert.equal(call.choices[0].finish_reason, 'tool_calls');
  assert.equal(call.choices[0].token_ids.length, call.usage.completion_tokens);
  const callStream = await collect(await client.chat.completions.create({ ...toolReq, stream: true }));
  assert.deepEqual(callStream.ids.get(0), call.choices[0].token_ids);
  const detok = await fetch(`${server.baseUrl}/detokenize`, { method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, tokens: call.choices[0].token_ids }) });
  assert.ok((await detok.json()).prompt.includes('forecast'));
  // Completions: each choice its prompt's ids and its own output ids; n = 2 streamed.
  const compReq = { model: MODEL, prompt: ['hello world', [3, 4, 5]], max_tokens: 6, temperature: 1,
    seed: 2, n: 2, ignore_eos: true, return_token_ids: true };
  const comp = await client.completions.create(compReq);
  assert.equal(comp.choices.length, 4);
  assert.deepEqual(comp.choices[2].prompt_token_ids, [3, 4, 5]);
  assert.deepEqual(comp.choices[3].prompt_token_ids, [3, 4, 5]);
  assert.deepEqual(comp.choices[0].prompt_token_ids, comp.choices[1].prompt_token_ids);
  for (const c of comp.choices) assert.equal(c.token_ids.length, 6);
  const compStream = await client.completions.create({ ...compReq, stream: true,
    stream_options: { include_usage: true, continuous_usage_stats: true } });
  const ids = new Map();
  const prompts = new Map();
  for await (const chunk of compStream) {
    if (chunk.choices.length === 0) continue;
    const ch = chunk.choices[0];
    if (ch.prompt_token_ids) {
      assert.ok(!prompts.has(ch.index), 'the prompt ids come once');
      prompts.set(ch.index, ch.prompt_token_ids);
    }
    ids.set(ch.index, (ids.get(ch.index) ?? []).concat(ch.token_ids));
    assert.equal(chunk.usage.completion_tokens, ids.get(ch.index).length);
    assert.equal(chunk.usage.prompt_tokens, prompts.get(ch.index).length);
  }
  comp.choices.forEach((c, i) => {
    assert.deepEqual(ids.get(i), c.token_ids);
    assert.deepEqual(prompts.get(i), c.prompt_token_ids);
  });
  // Without the field nothing is added; a wrong type is a 400 naming it.
  const none = await client.chat.completions.create({ ...plainReq, return_token_ids: undefined });
  assert.equal(none.prompt_token_ids, undefined);
  assert.equal(none.choices[0].token_ids, undefined);
  await assert.rejects(client.chat.completions.create({ ...plainReq, return_token_ids: 'yes' }),
    (e) => e.status === 400 && e.param === 'return_token_ids');
  await assert.rejects(client.completions.create({ ...compReq, stream: true,
    stream_options: { continuous_usage_stats: 1 } }),
  (e) => e.status === 400 && e.param === 'stream_options.continuous_usage_stats');
});
