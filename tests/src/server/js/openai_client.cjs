// latte serve through OpenAI's own Node SDK (the `openai` npm package): what an application built
// on it sees must parse and behave as it does against OpenAI. One server, with an API key, serves
// every check. Usage: node openai_client.cjs LATTE_BINARY
"use strict";
const { OpenAI, AuthenticationError, BadRequestError } = require("openai");
const { startServer, check, runTest } = require("./harness.cjs");

const MAX_TOKENS = 16;

// usage{} as OpenAI's: positive counts that add up, no more generated than asked for.
function checkUsage(usage, what) {
  check(usage, `${what}: no usage`);
  const { prompt_tokens: p, completion_tokens: c, total_tokens: t } = usage;
  check(p > 0 && c > 0 && c <= MAX_TOKENS && t === p + c, `${what}: usage inconsistent: ${JSON.stringify(usage)}`);
}

// A finish_reason that matches how many tokens came: "length" at exactly max_tokens.
function checkFinish(reason, usage, what) {
  check(reason === "stop" || reason === "length", `${what}: finish_reason ${reason}`);
  if (reason === "length")
    check(usage.completion_tokens === MAX_TOKENS, `${what}: "length" after ${usage.completion_tokens} tokens`);
}

// The SDK call must throw its error class for the status (and not retry: maxRetries is 0).
async function expectError(call, errorClass, status, what) {
  try {
    await call();
  } catch (e) {
    check(e instanceof errorClass && e.status === status, `${what}: ${e.constructor.name} ${e.status}: ${e.message}`);
    return e;
  }
  check(false, `${what}: no error`);
}

runTest(120_000, async () => {
  const key = "latte-test-key";
  // --no-cache-prompt: each request evaluates its prompt afresh, so the greedy streamed reply is
  // the same computation as the non-streamed one and must give the same text.
  const server = await startServer(process.argv[2], ["--api-key", key, "-np", "1", "-c", "512", "--no-cache-prompt"]);
  const options = { baseURL: `${server.url}/v1`, timeout: 30_000, maxRetries: 0 };
  const client = new OpenAI({ ...options, apiKey: key });

  const models = await client.models.list();
  check(models.data.length === 1 && typeof models.data[0].id === "string", `models: ${JSON.stringify(models.data)}`);
  const model = models.data[0].id;

  const messages = [{ role: "user", content: "Tell me a story about a cat." }];
  const chat = await client.chat.completions.create({ model, messages, max_tokens: MAX_TOKENS, temperature: 0 });
  const choice = chat.choices[0];
  check(chat.object === "chat.completion" && chat.choices.length === 1, `chat: ${JSON.stringify(chat)}`);
  check(choice.message.role === "assistant", `chat: role ${choice.message.role}`);
  check(typeof choice.message.content === "string" && choice.message.content.length > 0,
        `chat: content ${JSON.stringify(choice.message.content)}`);
  checkUsage(chat.usage, "chat");
  checkFinish(choice.finish_reason, chat.usage, "chat");

  // Streamed: the SDK parses the server-sent events; the deltas must add up to the same reply, and
  // the last chunk (choices: []) carries the usage.
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: MAX_TOKENS, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  let chunks = 0, text = "", finish = null, usage = null, afterUsage = 0;
  for await (const chunk of stream) {
    chunks++;
    check(chunk.object === "chat.completion.chunk", `stream: chunk ${JSON.stringify(chunk)}`);
    if (usage) afterUsage++;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta.content ?? "";
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  check(chunks >= 3, `stream: ${chunks} chunks`);
  check(text === choice.message.content, `stream: deltas ${JSON.stringify(text)}, whole reply ${JSON.stringify(choice.message.content)}`);
  check(usage && afterUsage === 0, "stream: no usage chunk at the end");
  checkUsage(usage, "stream");
  check(usage.completion_tokens === chat.usage.completion_tokens, "stream: usage differs from the whole reply's");
  checkFinish(finish, usage, "stream");

  const completion = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: MAX_TOKENS, temperature: 0 });
  check(completion.object === "text_completion", `completions: ${JSON.stringify(completion)}`);
  check(typeof completion.choices[0].text === "string" && completion.choices[0].text.length > 0,
        `completions: text ${JSON.stringify(completion.choices[0].text)}`);
  checkUsage(completion.usage, "completions");
  checkFinish(completion.choices[0].finish_reason, completion.usage, "completions");

  const stranger = new OpenAI({ ...options, apiKey: "not-the-key" });
  await expectError(() => stranger.chat.completions.create({ model, messages, max_tokens: 1 }), AuthenticationError, 401,
                    "wrong key");
  const tooCold = await expectError(() => client.chat.completions.create({ model, messages, temperature: -1 }),
                                    BadRequestError, 400, "temperature -1");
  check(/temperature/.test(tooCold.message), `temperature -1: the message does not name the field: ${tooCold.message}`);
  await expectError(() => client.chat.completions.create({ model }), BadRequestError, 400, "no messages");
});
