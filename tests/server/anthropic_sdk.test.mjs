// The official `@anthropic-ai/sdk` client against a live beamserve: messages (plain, streaming,
// thinking, tool_use round trip, stop sequences, output_format), count_tokens, and Anthropic-shaped
// errors.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, importNodePackage, Tok, forceOneToken } from './lib/harness.mjs';

let server;
let client;
const MODEL = 'tiny-chat';
const weatherTool = {
  name: 'get_weather', description: 'Weather for a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};
const asciiOnly = Object.fromEntries(Array.from({ length: 128 }, (_, i) => [String(131 + i), -100]));
// No think or tool-call markup (fixture ids 503-510): one text block whatever the greedy tokens
// are on the device.
const textOnly = Object.fromEntries(Array.from({ length: 8 }, (_, i) => [String(503 + i), -100]));

before(async () => {
  server = await startServer();
  const { default: Anthropic } = await importNodePackage('@anthropic-ai/sdk');
  client = new Anthropic({ apiKey: 'unused', baseURL: server.baseUrl, maxRetries: 0 });
});

after(async () => {
  assert.equal(await server.stop(), 0);
});

test('messages: plain text with usage', async () => {
  const m = await client.messages.create({
    model: MODEL, max_tokens: 10, messages: [{ role: 'user', content: 'Hello there' }],
    system: 'You are terse.', temperature: 0, ignore_eos: true, logit_bias: textOnly,
  });
  assert.match(m.id, /^msg_/);
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.equal(m.stop_reason, 'max_tokens');
  assert.equal(m.content.length, 1);
  assert.equal(m.content[0].type, 'text');
  assert.equal(m.usage.output_tokens, 10);
  assert.ok(m.usage.input_tokens + m.usage.cache_read_input_tokens > 5);
  // count_tokens counts the same prompt.
  const count = await client.messages.countTokens({
    model: MODEL, messages: [{ role: 'user', content: 'Hello there' }], system: 'You are terse.',
  });
  assert.equal(count.input_tokens, m.usage.input_tokens + m.usage.cache_read_input_tokens);
});

test('messages: streaming events build the same message', async () => {
  const req = { model: MODEL, max_tokens: 12, messages: [{ role: 'user', content: 'Weather?' }], temperature: 0,
    ignore_eos: true };
  const plain = await client.messages.create(req);
  const events = [];
  let text = '';
  const raw = await client.messages.create({ ...req, stream: true });
  for await (const ev of raw) {
    events.push(ev.type);
    if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
  }
  assert.equal(events[0], 'message_start');
  assert.equal(events.at(-1), 'message_stop');
  assert.equal(events.at(-2), 'message_delta');
  assert.ok(events.includes('content_block_start'));
  assert.ok(events.includes('content_block_stop'));
  assert.equal(text, plain.content[0].text);
  // The helper accumulates the final message.
  const final = await client.messages.stream(req).finalMessage();
  assert.equal(final.content[0].text, plain.content[0].text);
  assert.equal(final.stop_reason, 'max_tokens');
  assert.equal(final.usage.output_tokens, 12);
});

test('messages: thinking block then text', async () => {
  const req = { model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: 'weather?' }],
    thinking: { type: 'enabled', budget_tokens: 1024 }, ...forceOneToken(Tok.THINK_ANSWER) };
  const m = await client.messages.create(req);
  assert.deepEqual(m.content.map((b) => b.type), ['thinking', 'text']);
  assert.equal(m.content[0].thinking, 'The user asks about the weather.');
  assert.equal(m.content[1].text, 'It is sunny in Paris.');
  assert.equal(m.stop_reason, 'end_turn');
  const final = await client.messages.stream(req).finalMessage();
  assert.deepEqual(final.content.map((b) => b.type), ['thinking', 'text']);
  assert.equal(final.content[0].thinking, m.content[0].thinking);
  assert.equal(final.content[1].text, m.content[1].text);
});

test('messages: tool_use round trip', async () => {
  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const m = await client.messages.create({
    model: MODEL, max_tokens: 5, messages, tools: [weatherTool], ...forceOneToken(Tok.TOOL_CALL),
  });
  assert.equal(m.stop_reason, 'tool_use');
  const use = m.content.find((b) => b.type === 'tool_use');
  assert.equal(use.name, 'get_weather');
  assert.deepEqual(use.input, { city: 'Paris' });
  assert.match(use.id, /^toolu_/);
  // Streaming: input_json_delta pieces parse to the same input.
  const stream = client.messages.stream({
    model: MODEL, max_tokens: 5, messages, tools: [weatherTool], ...forceOneToken(Tok.TOOL_CALL),
  });
  let json = '';
  stream.on('streamEvent', (ev) => {
    if (ev.type === 'content_block_delta' && ev.delta.type === 'input_json_delta') json += ev.delta.partial_json;
  });
  const final = await stream.finalMessage();
  assert.deepEqual(JSON.parse(json), { city: 'Paris' });
  assert.deepEqual(final.content.find((b) => b.type === 'tool_use').input, { city: 'Paris' });
  assert.equal(final.stop_reason, 'tool_use');
  // Second turn with the tool result.
  messages.push({ role: 'assistant', content: m.content },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '21 degrees' }] });
  const second = await client.messages.create({
    model: MODEL, max_tokens: 4, messages, tools: [weatherTool], temperature: 0, ignore_eos: true,
    logit_bias: { [Tok.TOOL_CALL]: -100 },
  });
  assert.equal(second.stop_reason, 'max_tokens');
  assert.ok(second.usage.input_tokens + second.usage.cache_read_input_tokens >
    m.usage.input_tokens + m.usage.cache_read_input_tokens);
});

test('messages: tool_choice tool and any without parallel use are one tool_use, then the turn ends', async () => {
  const alarm = {
    name: 'alarm', input_schema: { type: 'object', properties: { on: { type: 'boolean' } }, required: ['on'] },
  };
  const unit = {
    name: 'unit', input_schema: { type: 'object', properties: { u: { enum: ['c', 'f'] } }, required: ['u'] },
  };
  const base = { model: MODEL, max_tokens: 100, temperature: 1, messages: [{ role: 'user', content: 'Go' }],
    tools: [alarm, unit] };
  for (let i = 0; i < 3; ++i) {
    for (const tool_choice of [{ type: 'tool', name: 'unit' }, { type: 'any', disable_parallel_tool_use: true }]) {
      const m = await client.messages.create({ ...base, tool_choice });
      assert.equal(m.stop_reason, 'tool_use', JSON.stringify(m.content));
      assert.equal(m.content.length, 1, JSON.stringify(m.content));
      const use = m.content[0];
      assert.equal(use.type, 'tool_use');
      if (tool_choice.type === 'tool') assert.equal(use.name, 'unit');
      if (use.name === 'unit') assert.ok(['c', 'f'].includes(use.input.u));
      else assert.equal(typeof use.input.on, 'boolean');
    }
  }
});

test('messages: stop_sequences report the sequence', async () => {
  const base = { model: MODEL, max_tokens: 30, messages: [{ role: 'user', content: 'Hi' }], temperature: 0,
    ignore_eos: true, logit_bias: asciiOnly };
  const full = (await client.messages.create(base)).content[0].text;
  const seq = full.slice(5, 7);
  const m = await client.messages.create({ ...base, stop_sequences: [seq] });
  assert.equal(m.stop_reason, 'stop_sequence');
  assert.equal(m.stop_sequence, seq);
  assert.equal(m.content[0].text, full.slice(0, full.indexOf(seq)));
});

test('errors are Anthropic-shaped', async () => {
  await assert.rejects(client.messages.create({ model: MODEL, messages: [{ role: 'user', content: 'x' }] }),
    (e) => e.status === 400 && e.error?.type === 'error' && e.error.error.type === 'invalid_request_error');
  await assert.rejects(client.messages.create({ model: 'claude-nope', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }),
    (e) => e.status === 404 && e.error.error.type === 'not_found_error');
});

test('messages: output_format json_schema (Anthropic structured outputs)', async () => {
  const schema = {
    type: 'object', properties: { ok: { type: 'boolean' }, size: { enum: ['s', 'm', 'l'] } },
    required: ['ok', 'size'], additionalProperties: false,
  };
  const m = await client.messages.create({
    model: MODEL, max_tokens: 200, temperature: 1, messages: [{ role: 'user', content: 'An item' }],
    thinking: { type: 'disabled' }, output_format: { type: 'json_schema', schema },
  });
  assert.equal(m.stop_reason, 'end_turn');
  const v = JSON.parse(m.content.map((b) => b.text ?? '').join(''));
  assert.deepEqual(Object.keys(v), ['ok', 'size']);
  assert.equal(typeof v.ok, 'boolean');
  assert.ok(['s', 'm', 'l'].includes(v.size));
  await assert.rejects(client.messages.create({
    model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: 'x' }],
    output_format: { type: 'json_schema', schema: { type: 'string', pattern: '^(?=a)' } },
  }), (e) => e.status === 400 && /pattern: lookaround/.test(e.error.error.message));
});
