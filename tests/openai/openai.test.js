// wasted's HTTP face through the real `openai` npm client (pinned in
// package-lock.json, installed by `npm ci --prefix tests/openai`), run with
// Node's built-in test runner by tests/openai_test.sh, which starts a
// daemon serving stories260K and passes:
//   WASTE_BASE_URL     http://127.0.0.1:PORT/v1
//   WASTE_API_KEY      the key the daemon wants
//   WASTE_GOLDEN_TEXT  stories260K's greedy continuation of BOS (256 tokens)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import OpenAI, { AuthenticationError, BadRequestError, NotFoundError } from 'openai';

const baseURL = process.env.WASTE_BASE_URL;
const apiKey = process.env.WASTE_API_KEY;
const golden = readFileSync(process.env.WASTE_GOLDEN_TEXT, 'utf8');
const model = 'stories260K';
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120_000 });

test('models.list() lists the model', async () => {
  const models = [];
  for await (const m of client.models.list()) models.push(m);
  assert.deepEqual(models.map((m) => m.id), [model]);
  assert.equal(models[0].object, 'model');
  const one = await client.models.retrieve(model);
  assert.equal(one.id, model);
});

test('a streamed completion from BOS at temperature 0 is the golden text', async () => {
  const stream = await client.completions.create({
    model, prompt: '', max_tokens: 256, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let finish = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, 'text_completion');
    assert.match(chunk.id, /^cmpl-/);
    for (const choice of chunk.choices) {
      text += choice.text;
      if (choice.finish_reason) finish = choice.finish_reason;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  assert.ok(chunks > 100, `tokens arrive as separate chunks (${chunks})`);
  assert.equal(text, golden);
  assert.equal(finish, 'length');
  assert.equal(usage.prompt_tokens, 1);
  assert.equal(usage.completion_tokens, 256);
  assert.equal(usage.total_tokens, 257);
});

test('a non-streamed completion', async () => {
  const completion = await client.completions.create({
    model, prompt: '', max_tokens: 256, temperature: 0,
  });
  assert.equal(completion.object, 'text_completion');
  assert.equal(completion.choices.length, 1);
  assert.equal(completion.choices[0].text, golden);
  assert.equal(completion.choices[0].finish_reason, 'length');
  assert.equal(completion.usage.completion_tokens, 256);
  assert.equal(completion.usage.total_tokens, 257);
});

const messages = [
  { role: 'system', content: 'Tell a story.' },
  { role: 'user', content: 'Once upon a time' },
];

test('chat completions, streamed and not, agree at temperature 0', async () => {
  const whole = await client.chat.completions.create({
    model, messages, max_tokens: 20, temperature: 0,
  });
  assert.equal(whole.object, 'chat.completion');
  assert.match(whole.id, /^chatcmpl-/);
  const message = whole.choices[0].message;
  assert.equal(message.role, 'assistant');
  assert.ok(message.content.length > 0);
  assert.equal(whole.choices[0].finish_reason, 'length');
  assert.equal(whole.usage.completion_tokens, 20);
  assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + 20);

  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 20, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let content = '';
  let role = null;
  let usage = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    for (const choice of chunk.choices) {
      if (choice.delta.role) role = choice.delta.role;
      if (choice.delta.content) content += choice.delta.content;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(role, 'assistant');
  assert.equal(content, message.content);
  // The same prompt again starts from the first request's KV cache
  // (cache_prompt): all of it but the last token, and the same text. (The
  // first shares at most the BOS token with the tests before it.)
  assert.ok(whole.usage.prompt_tokens_details.cached_tokens <= 1);
  assert.deepEqual(usage, {
    ...whole.usage,
    prompt_tokens_details: { cached_tokens: whole.usage.prompt_tokens - 1 },
  });
});

test('chat logprobs', async () => {
  const whole = await client.chat.completions.create({
    model, messages, max_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 3,
  });
  const content = whole.choices[0].logprobs.content;
  assert.equal(content.length, 5);
  for (const entry of content) {
    assert.ok(entry.logprob <= 0);
    assert.equal(entry.top_logprobs.length, 3);
  }
});

test('a wrong key is an AuthenticationError (401)', async () => {
  const stranger = new OpenAI({ baseURL, apiKey: 'sk-not-the-key', maxRetries: 0 });
  await assert.rejects(stranger.models.list(), (error) => {
    assert.ok(error instanceof AuthenticationError, String(error));
    assert.equal(error.status, 401);
    return true;
  });
  await assert.rejects(
    stranger.chat.completions.create({ model, messages, max_tokens: 1 }),
    AuthenticationError);
});

test('bad requests and unknown models are the client errors the SDK knows', async () => {
  await assert.rejects(
    client.chat.completions.create({ model, messages, n: 2 }),
    (error) => {
      assert.ok(error instanceof BadRequestError, String(error));
      assert.equal(error.param, 'n');
      return true;
    });
  await assert.rejects(
    client.completions.create({ model: 'no-such-model', prompt: 'x' }),
    (error) => error instanceof NotFoundError && error.code === 'model_not_found');
});
