// agentr1 serve through the official OpenAI node client (tests/ref/node_modules/openai):
// what a user's client library sends and parses must work, errors included.
// usage: node openai_client_check.mjs BASE_URL API_KEY MODEL_NAME
// Prints one "ok   <check>" / "FAIL <check>" line per check; exit code 1 if any failed.
import OpenAI from 'openai';

const [baseURL, apiKey, modelName] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0, timeout: 30000 });
let failed = 0;
function check(name, cond, detail = '') {
  console.log(`${cond ? 'ok  ' : 'FAIL'} ${name}${cond || !detail ? '' : ': ' + detail}`);
  if (!cond) failed = 1;
}
// Runs fn, expecting an OpenAI.APIError with this status (and param, if given).
async function expectError(name, status, param, fn) {
  try {
    await fn();
    check(name, false, 'no error');
  } catch (e) {
    const ok = e instanceof OpenAI.APIError && e.status === status && (param === undefined || e.param === param) &&
      typeof e.error?.message === 'string' && e.error.message.length > 0;
    check(name, ok, `${e.constructor.name} status ${e.status} param ${e.param} ${e.message}`);
  }
}

const models = await client.models.list();
check('models.list', models.data.length === 1 && models.data[0].id === modelName && models.data[0].object === 'model',
  JSON.stringify(models.data));

// Completions: a text prompt and the same prompt as token ids give the same tokens.
const text = await client.completions.create({
  model: modelName, prompt: 'The answer is', max_tokens: 8, seed: 5, return_token_ids: true, logprobs: 1,
});
const c0 = text.choices[0];
check('completions (text): shape', text.object === 'text_completion' && typeof c0.text === 'string' &&
  ['stop', 'length'].includes(c0.finish_reason) && text.usage.total_tokens ===
  text.usage.prompt_tokens + text.usage.completion_tokens, JSON.stringify(text));
check('completions (text): one log-prob per token id', Array.isArray(c0.token_ids) &&
  c0.logprobs.token_logprobs.length === c0.token_ids.length && c0.logprobs.tokens.length === c0.token_ids.length);
const ids = await client.completions.create({
  model: modelName, prompt: c0.prompt_token_ids, max_tokens: 8, seed: 5, return_token_ids: true, logprobs: 1,
});
check('completions (token ids) = (text)', JSON.stringify(ids.choices[0].token_ids) === JSON.stringify(c0.token_ids) &&
  JSON.stringify(ids.choices[0].logprobs.token_logprobs) === JSON.stringify(c0.logprobs.token_logprobs));
const batch = await client.completions.create({
  model: modelName, prompt: [c0.prompt_token_ids, c0.prompt_token_ids], max_tokens: 8, seed: 5, n: 2,
  return_token_ids: true,
});
check('completions: 2 prompts x n=2 -> 4 choices, seeds 5,6,5,6', batch.choices.length === 4 &&
  batch.choices.map((c) => c.index).join() === '0,1,2,3' &&
  JSON.stringify(batch.choices[0].token_ids) === JSON.stringify(c0.token_ids) &&
  JSON.stringify(batch.choices[2].token_ids) === JSON.stringify(c0.token_ids) &&
  JSON.stringify(batch.choices[1].token_ids) === JSON.stringify(batch.choices[3].token_ids));

// Completions streamed: the same seed gives the same text, in several chunks.
const cstream = await client.completions.create({
  model: modelName, prompt: 'The answer is', max_tokens: 8, seed: 5, stream: true, stream_options: { include_usage: true },
});
let ctext = '';
let cfinish = null;
let cchunks = 0;
let cusage = null;
for await (const chunk of cstream) {
  if (chunk.usage) cusage = chunk.usage;
  for (const ch of chunk.choices) {
    ctext += ch.text;
    if (ch.text.length > 0) cchunks += 1;
    if (ch.finish_reason) cfinish = ch.finish_reason;
  }
}
check('completions stream: text = non-streamed text', ctext === c0.text, `${JSON.stringify(ctext)} vs ${JSON.stringify(c0.text)}`);
check('completions stream: finish_reason, usage, several chunks', cfinish === c0.finish_reason &&
  cusage?.completion_tokens === text.usage.completion_tokens && (cchunks > 1 || c0.token_ids.length <= 1),
  `${cfinish} ${JSON.stringify(cusage)} ${cchunks} chunks`);

// Chat, with tools, non-streaming and streaming with the same seed.
const tools = [{
  type: 'function',
  function: {
    name: 'add', description: 'Add two integers',
    parameters: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } }, required: ['a', 'b'] },
  },
}];
const messages = [{ role: 'user', content: 'What is 2+3?' }];
const plain = await client.chat.completions.create({ model: modelName, messages, max_tokens: 4, seed: 1 });
const chat = await client.chat.completions.create({
  model: modelName, messages, tools, max_tokens: 24, seed: 1, logprobs: true, top_logprobs: 1,
});
const m = chat.choices[0];
check('chat: shape', chat.object === 'chat.completion' && m.message.role === 'assistant' &&
  ['stop', 'length', 'tool_calls'].includes(m.finish_reason), JSON.stringify(chat));
check('chat: tools are rendered into the prompt', chat.usage.prompt_tokens > plain.usage.prompt_tokens + 20,
  `${chat.usage.prompt_tokens} vs ${plain.usage.prompt_tokens}`);
check('chat: logprobs per token', m.logprobs.content.length === chat.usage.completion_tokens &&
  m.logprobs.content.every((e) => typeof e.logprob === 'number' && e.top_logprobs.length === 1));
check('chat: tool_calls well-formed if any', m.message.tool_calls === undefined || m.message.tool_calls.every((t) =>
  t.type === 'function' && typeof t.id === 'string' && typeof t.function.arguments === 'string'));
const stream = await client.chat.completions.create({
  model: modelName, messages, tools, max_tokens: 24, seed: 1, stream: true, stream_options: { include_usage: true },
});
let content = '';
let finish = null;
let role = null;
let usage = null;
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage;
  for (const ch of chunk.choices) {
    if (ch.delta.role) role = ch.delta.role;
    if (typeof ch.delta.content === 'string') content += ch.delta.content;
    if (ch.finish_reason) finish = ch.finish_reason;
  }
}
check('chat stream: content = non-streamed content', content === (m.message.content ?? ''),
  `${JSON.stringify(content)} vs ${JSON.stringify(m.message.content)}`);
check('chat stream: role, finish_reason, usage', role === 'assistant' && finish === m.finish_reason &&
  usage?.completion_tokens === chat.usage.completion_tokens);
const thinkOff = await client.chat.completions.create({
  model: modelName, messages, max_tokens: 2, seed: 1, chat_template_kwargs: { enable_thinking: false },
});
check('chat: chat_template_kwargs reach the template', thinkOff.usage.prompt_tokens > plain.usage.prompt_tokens);

// Errors as the client sees them.
await expectError('error: unknown model', 400, 'model', () =>
  client.completions.create({ model: 'gpt-4', prompt: 'x', max_tokens: 1 }));
await expectError('error: bad temperature', 400, 'temperature', () =>
  client.completions.create({ model: modelName, prompt: 'x', max_tokens: 1, temperature: -1 }));
await expectError('error: tool_choice required', 400, 'tool_choice', () =>
  client.chat.completions.create({ model: modelName, messages, tools, tool_choice: 'required', max_tokens: 1 }));
await expectError('error: empty messages', 400, 'messages', () =>
  client.chat.completions.create({ model: modelName, messages: [], max_tokens: 1 }));
await expectError('error: unknown route', 404, undefined, () => client.get('/nothing'));
await expectError('error: wrong api key', 401, undefined, () =>
  new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'wrong', maxRetries: 0 }).models.list());

process.exit(failed);
