// What the real-client tests share: a `latte serve --port 0` process (its port read from the
// "listening on http://127.0.0.1:PORT" line on stderr, as tests/src/server/server_process.h reads
// it), killed whenever the test's process exits, and a run that ends in one line, "ok" or the
// reason it failed, with a deadline so that a hang fails the test instead of holding up CI.
"use strict";
const { spawn } = require("node:child_process");
const path = require("node:path");

const testName = path.basename(process.argv[1]);

// Ends the test as failed, with the reason on one line (the server's stderr may span several).
function fail(reason) {
  console.error(`${testName}: FAIL: ${String(reason).replace(/\s*\n\s*/g, " | ")}`);
  process.exit(1);  // runs the "exit" handler below, which kills the server
}

function check(condition, reason) {
  if (!condition) fail(reason);
}

// Starts `latte serve --port 0 ARGS...` and waits (at most 30 s) until it listens.
async function startServer(latte, args) {
  const child = spawn(latte, ["serve", "--port", "0", ...args], { stdio: ["ignore", "ignore", "pipe"] });
  // Also on a failure or the deadline: process.exit() runs "exit" handlers, and SIGTERM (CTest's
  // timeout, a Ctrl-C) is turned into one.
  process.on("exit", () => child.kill("SIGKILL"));
  for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => fail(`stopped by ${signal}`));
  let stderr = "";
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`latte serve did not listen within 30 s: ${stderr}`)), 30_000);
    // Read on for as long as it runs, so that its log never fills the pipe and blocks it.
    child.stderr.on("data", (data) => {
      if (stderr.length < 65536) stderr += data;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+) /.exec(stderr);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    child.on("error", (e) => reject(new Error(`cannot start ${latte}: ${e.message}`)));
    child.on("exit", (code, signal) => reject(new Error(`latte serve ended (${code ?? signal}): ${stderr}`)));
  });
  return { url: `http://127.0.0.1:${port}`, stderr: () => stderr };
}

// Runs the test body with a deadline; prints "NAME: ok" and exits 0, or fails with the reason
// (an exception's message and where it was thrown).
function runTest(deadlineMs, body) {
  setTimeout(() => fail(`no result within ${deadlineMs / 1000} s`), deadlineMs).unref();
  body().then(
    () => {
      console.log(`${testName}: ok`);
      process.exit(0);
    },
    (e) => fail(e && e.stack ? e.stack.split("\n").slice(0, 2).join(" ") : e),
  );
}

module.exports = { startServer, check, fail, runTest };
