// The official JavaScript SDKs against a running mlxcel server that serves
// the scripted model of internal/server/scripted_test.go (node_sdk_test.go
// starts it and passes BASE). Every check throws on a wrong value; the
// process exits 1 with the failures listed.
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { generateText, streamText, tool, jsonSchema, stepCountIs } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';

const BASE = process.env.BASE;
const MODEL = 'scripted';
const failures = [];
const check = (name, cond, got) => { if (!cond) failures.push(`${name}: ${JSON.stringify(got)}`); };

const weatherParams = { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city'] };
const timeParams = { type: 'object', properties: {} };
const chatTools = [
  { type: 'function', function: { name: 'get_weather', parameters: weatherParams } },
  { type: 'function', function: { name: 'get_time', parameters: timeParams } },
];
const weather = { city: 'Paris', days: 3 };
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

async function openaiChat() {
  const client = new OpenAI({ baseURL: `${BASE}/v1`, apiKey: 'unused', maxRetries: 0 });
  const req = { model: MODEL, messages: [{ role: 'user', content: '<s_tool>' }], tools: chatTools, temperature: 0, max_tokens: 40 };
  const r = await client.chat.completions.create(req);
  const m = r.choices[0].message;
  check('chat finish_reason', r.choices[0].finish_reason === 'tool_calls', r.choices[0].finish_reason);
  check('chat content', m.content === 'Let me check.', m.content);
  check('chat tool calls', m.tool_calls?.length === 2 && m.tool_calls[0].function.name === 'get_weather' &&
    same(JSON.parse(m.tool_calls[0].function.arguments), weather) && m.tool_calls[1].function.name === 'get_time', m.tool_calls);

  // The stream helper accumulates delta.tool_calls into the same message.
  const final = await client.chat.completions.stream(req).finalChatCompletion();
  const fm = final.choices[0].message;
  check('chat stream tool calls', fm.tool_calls?.length === 2 && fm.tool_calls[0].id.startsWith('call_') &&
    same(JSON.parse(fm.tool_calls[0].function.arguments), weather), fm.tool_calls);

  // runTools: the SDK runs the functions and sends their results back
  // until the model answers; the scripted model answers a tool result
  // "<s_plain>" with "Hello world".
  const calls = [];
  const runner = client.chat.completions.runTools({
    model: MODEL, temperature: 0, max_tokens: 40, messages: [{ role: 'user', content: '<s_tool>' }],
    tools: chatTools.map(t => ({ type: 'function', function: { ...t.function, parse: JSON.parse,
      function: (args) => { calls.push([t.function.name, args]); return '<s_plain>'; } } })),
  });
  const content = await runner.finalContent();
  check('runTools calls', calls.length === 2 && same(calls[0], ['get_weather', weather]) && calls[1][0] === 'get_time', calls);
  check('runTools answer', content === 'Hello world', content);
}

async function openaiResponses() {
  const client = new OpenAI({ baseURL: `${BASE}/v1`, apiKey: 'unused', maxRetries: 0 });
  const tools = [{ type: 'function', name: 'get_weather', parameters: weatherParams, strict: false },
                 { type: 'function', name: 'get_time', parameters: timeParams, strict: false }];
  const req = { model: MODEL, input: '<s_tool>', tools, temperature: 0, max_output_tokens: 40 };
  const r = await client.responses.create(req);
  const fc = r.output.filter(o => o.type === 'function_call');
  check('responses output_text', r.output_text === 'Let me check.', r.output_text);
  check('responses function calls', fc.length === 2 && fc[0].name === 'get_weather' && same(JSON.parse(fc[0].arguments), weather), fc);

  const stream = client.responses.stream(req);
  const deltas = [];
  stream.on('response.output_text.delta', (e) => deltas.push(e.delta));
  const final = await stream.finalResponse();
  check('responses stream text', deltas.join('') === 'Let me check.', deltas);
  check('responses stream final', final.output.filter(o => o.type === 'function_call').length === 2, final.output);

  const next = await client.responses.create({ model: MODEL, previous_response_id: r.id, temperature: 0,
    input: [...fc.map(c => ({ type: 'function_call_output', call_id: c.call_id, output: 'ok' })), { role: 'user', content: '<s_plain>' }] });
  check('responses previous_response_id', next.output_text === 'Hello world', next.output_text);
}

async function anthropic() {
  const client = new Anthropic({ baseURL: BASE, apiKey: 'unused', maxRetries: 0 });
  const tools = [{ name: 'get_weather', input_schema: weatherParams }, { name: 'get_time', input_schema: timeParams }];
  const req = { model: MODEL, max_tokens: 40, temperature: 0, messages: [{ role: 'user', content: '<s_tool>' }], tools };
  const m = await client.messages.create(req);
  const uses = m.content.filter(b => b.type === 'tool_use');
  check('messages stop_reason', m.stop_reason === 'tool_use', m.stop_reason);
  check('messages tool_use', uses.length === 2 && uses[0].name === 'get_weather' && same(uses[0].input, weather), m.content);

  const final = await client.messages.stream(req).finalMessage();
  const su = final.content.filter(b => b.type === 'tool_use');
  check('messages stream tool_use', su.length === 2 && same(su[0].input, weather) && final.content[0].text === 'Let me check.', final.content);

  const thought = await client.messages.create({ ...req, tools: undefined, messages: [{ role: 'user', content: '<s_think>' }] });
  check('messages thinking', thought.content[0].type === 'thinking' && thought.content[0].thinking === 'The user wants a number.\nSo: 42.' &&
    thought.content[1].text === 'It is 42.', thought.content);
  const count = await client.messages.countTokens({ model: MODEL, messages: [{ role: 'user', content: '<s_plain>' }] });
  check('count_tokens', count.input_tokens > 0, count);
}

async function vercelAI() {
  const provider = createOpenAICompatible({ name: 'mlxcel', baseURL: `${BASE}/v1`, apiKey: 'unused' });
  const model = provider(MODEL);
  const executed = [];
  const tools = {
    get_weather: tool({ inputSchema: jsonSchema(weatherParams), execute: async (input) => { executed.push(input); return '<s_plain>'; } }),
    get_time: tool({ inputSchema: jsonSchema(timeParams), execute: async () => '<s_plain>' }),
  };
  const r = await generateText({ model, prompt: '<s_tool>', tools, temperature: 0, maxOutputTokens: 40, stopWhen: stepCountIs(3) });
  check('ai tool calls', r.steps[0].toolCalls.length === 2 && r.steps[0].toolCalls[0].toolName === 'get_weather', r.steps[0].toolCalls);
  check('ai executed', executed.length === 1 && same(executed[0], weather), executed);
  check('ai final text', r.text === 'Hello world', r.text);

  const s = streamText({ model, prompt: '<s_tool>', tools, temperature: 0, maxOutputTokens: 40 });
  const streamed = await s.toolCalls;
  check('ai stream tool calls', streamed.length === 2 && same(streamed[0].input, weather), streamed);
}

for (const [name, f] of [['openai chat', openaiChat], ['openai responses', openaiResponses], ['anthropic', anthropic], ['ai', vercelAI]]) {
  try { await f(); } catch (e) { failures.push(`${name}: ${e?.stack ?? e}`); }
}
if (failures.length) {
  console.error(failures.join('\n'));
  process.exit(1);
}
console.log('sdk.mjs: all checks passed');
