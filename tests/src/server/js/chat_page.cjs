// latte serve's chat page (GET /, src/server/web/chat.html) in headless Chromium, driven with
// puppeteer-core: the page loads, a message typed and sent is answered by a streamed request, and
// the reply appears in the page piece by piece as it streams, not at once at the end.
// Usage: node chat_page.cjs LATTE_BINARY CHROMIUM
"use strict";
const puppeteer = require("puppeteer-core");
const { startServer, check, runTest } = require("./harness.cjs");

const MESSAGE = "Tell me a story about a cat.";

// In the page: samples, every 10 ms while a reply streams (Send is disabled until it has ended),
// the text the reply shows. A timer's callback runs between the page's tasks, when the browser may
// paint, so these are texts a user saw; a reply written into the page only once the response had
// ended (all its events handled in one go) leaves no sample.
function sampleReplyWhileStreaming() {
  window.replySamples = [];
  setInterval(() => {
    const answer = document.querySelector("#log .assistant .answer");
    if (document.getElementById("send").disabled && answer && answer.textContent) {
      const samples = window.replySamples;
      if (samples[samples.length - 1] !== answer.textContent) samples.push(answer.textContent);
    }
  }, 10);
}

runTest(120_000, async () => {
  // --temp 0: the page sends no sampling fields, so its reply is the greedy one, the same on every
  // run. -c 256: nor does it send max_tokens; the slot's context bounds the reply.
  const server = await startServer(process.argv[2], ["-np", "1", "-c", "256", "--temp", "0"]);
  const browser = await puppeteer.launch({
    executablePath: process.argv[3],
    headless: true,  // Chromium's own headless mode (--headless=new)
    // CI runs as root, where Chromium will not start sandboxed; containers often have a small /dev/shm.
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
    timeout: 30_000,
    protocolTimeout: 30_000,
  });
  try {
    const page = await browser.newPage();
    page.setDefaultTimeout(30_000);
    const pageErrors = [];
    page.on("pageerror", (e) => pageErrors.push(e.message));
    const loaded = await page.goto(`${server.url}/`, { waitUntil: "load" });
    check(loaded.status() === 200 && (await page.title()) === "latte", `GET /: ${loaded.status()}, title ${await page.title()}`);
    await page.evaluate(sampleReplyWhileStreaming);

    const isChat = (r) => r.url() === `${server.url}/v1/chat/completions`;
    const requestSent = page.waitForRequest(isChat);
    const responseCame = page.waitForResponse(isChat);
    await page.type("#input", MESSAGE);
    await page.click("#send");

    const body = JSON.parse((await requestSent).postData());
    check(body.stream === true, `the page's request is not streamed: ${JSON.stringify(body)}`);
    check(JSON.stringify(body.messages) === JSON.stringify([{ role: "user", content: MESSAGE }]),
          `the page sent ${JSON.stringify(body.messages)}`);
    const response = await responseCame;
    const type = response.headers()["content-type"] || "";
    check(response.status() === 200 && type.startsWith("text/event-stream"), `reply: ${response.status()} ${type}`);

    // The page disables Send while a reply streams and enables it when the stream has ended.
    await page.waitForFunction(() => !document.getElementById("send").disabled, { timeout: 60_000 });
    const shown = await page.evaluate(() => {
      const answer = document.querySelector("#log .assistant .answer");
      return {
        user: document.querySelector("#log .user")?.textContent,
        text: answer?.textContent,
        error: answer?.classList.contains("error"),
        samples: window.replySamples,
        input: document.getElementById("input").value,
      };
    });
    check(shown.user === MESSAGE && shown.input === "", `the message is not shown as sent: ${JSON.stringify(shown)}`);
    check(typeof shown.text === "string" && !shown.error, `the reply shows ${shown.error ? "an error: " : ""}${shown.text}`);
    check(shown.text.trim().length > 0, "the reply is empty");
    // Streamed into the page: shown while the response went on, growing (each text extends the one
    // before), toward the whole reply.
    const samples = shown.samples;
    check(samples.length >= 2, `the reply was shown ${samples.length} time(s) while it streamed: not as it streamed`);
    for (const [i, sample] of samples.entries())
      check(shown.text.startsWith(sample) && (i === 0 || sample.startsWith(samples[i - 1])),
            `the reply did not grow: ${JSON.stringify(samples[i - 1])} then ${JSON.stringify(sample)}`);
    check(pageErrors.length === 0, `errors in the page: ${pageErrors.join("; ")}`);
  } finally {
    await browser.close();
  }
});
