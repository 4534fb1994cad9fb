// Drives the chat page of a running `mlxcel serve` in headless chromium:
// node chat.mjs URL [API_KEY] [CHROMIUM]. Prints one JSON line with what it
// saw and exits 1 at the first expectation that fails.
// Run by internal/webui/browser_test.go (scripts/test.sh installs chromium
// and this folder's playwright-core).
import { chromium } from "playwright-core";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [url, apiKey = "", executablePath = "/usr/bin/chromium"] = process.argv.slice(2);
const profile = mkdtempSync(join(tmpdir(), "mlxcel-chromium-"));
const flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];
const T = { timeout: 20000 };

function expect(ok, what) {
  if (!ok) throw new Error("expected " + what);
}

const seen = {};
let browser, page;
try {
  // A fresh profile (--user-data-dir) each run: no state carried over.
  browser = await chromium.launchPersistentContext(profile, { executablePath, args: flags, headless: true });
  page = browser.pages()[0] || await browser.newPage();
  page.on("pageerror", (e) => { seen.pageErrors = (seen.pageErrors || []).concat(String(e)); });
  await page.goto(url);

  // 1. The API key: asked for, then the model is shown.
  if (apiKey) {
    await page.waitForFunction(() => document.getElementById("model").textContent.includes("API key"), null, T);
    await page.fill("#api-key", apiKey);
    await page.dispatchEvent("#api-key", "change");
  }
  await page.waitForFunction(() => document.getElementById("model").textContent.includes("tokens"), null, T);
  seen.model = await page.textContent("#model");

  // 2. A message: the answer streams (seen growing while the request
  // runs), then ends with the speed shown.
  await page.fill("#max-tokens", "60");
  await page.dispatchEvent("#max-tokens", "change");
  await page.fill("#input", "Once upon a time");
  await page.press("#input", "Enter");
  await page.waitForSelector('.msg.assistant[data-state="streaming"] .content:not(:empty)', T);
  seen.streamingText = await page.textContent(".msg.assistant .content");
  await page.waitForSelector('.msg.assistant[data-state="done"]', T);
  seen.answer = await page.textContent(".msg.assistant .content");
  seen.speed = await page.textContent("#speed");
  expect(seen.answer.length > seen.streamingText.length, "the answer to grow after its first piece");
  expect(/^60 tokens · .*tok\/s/.test(seen.speed), "the speed of a 60-token answer, got " + seen.speed);

  // 3. The conversation survives a reload (localStorage).
  await page.reload();
  await page.waitForSelector(".msg.assistant .content", T);
  seen.afterReload = await page.textContent(".msg.assistant .content");
  expect(seen.afterReload === seen.answer, "the answer to be kept across a reload");
  expect((await page.textContent(".msg.user")) === "Once upon a time", "the user message to be kept");

  // 4. Stop: a new chat, a message, Stop while it streams.
  await page.click("#new-chat");
  await page.fill("#max-tokens", "");
  await page.dispatchEvent("#max-tokens", "change");
  expect((await page.$$(".msg")).length === 0, "New chat to clear the conversation");
  await page.fill("#input", "Tell me a story");
  await page.click("#send");
  await page.waitForSelector('.msg.assistant[data-state="streaming"] .content:not(:empty)', T);
  await page.click("#stop");
  await page.waitForSelector('.msg.assistant[data-state="stopped"]', T);
  seen.stopped = await page.textContent(".msg.assistant .content");
  await page.waitForTimeout(700);
  expect((await page.textContent(".msg.assistant .content")) === seen.stopped, "no text after Stop");
  expect(await page.isVisible("#send"), "Send to come back after Stop");

  // 5. Markdown, code blocks and a folded thought, from a stored
  // conversation.
  await page.evaluate(() => localStorage.setItem("mlxcel.messages", JSON.stringify([
    { role: "user", content: "<b>hi</b>" },
    { role: "assistant", state: "done", content: "<think>plan it</think>\n# Title\nSome **bold** and `x`.\n\n```go\nfmt.Println(\"<tag>\")\n```\n- one\n- two" },
  ])));
  await page.reload();
  await page.waitForSelector("pre code.language-go", T);
  seen.code = await page.textContent("pre code.language-go");
  expect(seen.code === 'fmt.Println("<tag>")', "the code block verbatim, got " + seen.code);
  expect((await page.textContent(".msg.assistant strong")) === "bold", "bold text");
  expect((await page.$$(".msg.assistant li")).length === 2, "a two-item list");
  expect((await page.textContent(".msg.assistant h1")) === "Title", "a heading");
  expect(!(await page.getAttribute("details.reasoning", "open")), "the thought folded");
  expect((await page.textContent("details.reasoning div")) === "plan it", "the thought inside the fold");
  expect(!(await page.textContent(".msg.assistant .content")).includes("think>"), "no think markup in the answer");
  expect((await page.textContent(".msg.user")) === "<b>hi</b>", "user text shown as text");
  expect(!seen.pageErrors, "no script errors: " + seen.pageErrors);
  console.log(JSON.stringify({ ok: true, ...seen }));
} catch (e) {
  // What the page showed, to tell a page bug from a server one.
  if (page) {
    seen.pageError = await page.textContent("#error").catch(() => "");
    seen.messagesHTML = (await page.innerHTML("#messages").catch(() => "")).slice(0, 2000);
  }
  console.log(JSON.stringify({ ok: false, error: String(e.message || e), ...seen }));
  process.exitCode = 1;
} finally {
  if (browser) await browser.close();
  rmSync(profile, { recursive: true, force: true });
}
