// The chat page: a conversation kept in localStorage, sent whole to
// /v1/chat/completions with stream: true, the answer rendered as it
// arrives (reasoning folded away), a stop button that aborts the request.
"use strict";

const $ = (id) => document.getElementById(id);
const store = {
  get(k, d) { try { return JSON.parse(localStorage.getItem("mlxcel." + k)) ?? d; } catch { return d; } },
  set(k, v) { localStorage.setItem("mlxcel." + k, JSON.stringify(v)); },
};

let messages = store.get("messages", []); // {role, content, reasoning, meta, state}
let model = "";
let controller = null;

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("api-key").value.trim();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

function showError(text) {
  $("error").textContent = text;
  $("error").hidden = !text;
}

async function apiError(resp) {
  try {
    const j = await resp.json();
    if (j.error && j.error.message) return j.error.message;
  } catch { /* not JSON */ }
  return resp.status + " " + resp.statusText;
}

async function loadModel() {
  try {
    const resp = await fetch("/v1/models", { headers: headers() });
    if (resp.status === 401) {
      $("model").textContent = "API key needed";
      showError("This server needs its API key: type it in the field above.");
      $("api-key").focus();
      return;
    }
    if (!resp.ok) { $("model").textContent = await apiError(resp); return; }
    const j = await resp.json();
    const m = j.data[0];
    model = m.id;
    $("model").textContent = m.id + (m.max_model_len ? " · " + m.max_model_len + " tokens" : "");
    showError("");
  } catch (e) {
    $("model").textContent = "server unreachable";
  }
}

function render() {
  const box = $("messages");
  box.replaceChildren(...messages.map(renderMessage));
  box.scrollTop = box.scrollHeight;
}

function renderMessage(m) {
  const div = document.createElement("div");
  div.className = "msg " + m.role + (m.state === "stopped" ? " stopped" : "");
  if (m.state) div.dataset.state = m.state;
  if (m.role === "user") {
    div.textContent = m.content;
    return div;
  }
  const split = m.reasoning ? { reasoning: m.reasoning, content: m.content } : splitThink(m.content);
  if (split.reasoning) {
    const d = document.createElement("details");
    d.className = "reasoning";
    const s = document.createElement("summary");
    s.textContent = m.state === "streaming" && !split.content ? "Thinking…" : "Thought";
    const body = document.createElement("div");
    body.textContent = split.reasoning;
    d.append(s, body);
    div.append(d);
  }
  const content = document.createElement("div");
  content.className = "content";
  content.innerHTML = renderMarkdown(split.content);
  div.append(content);
  if (m.meta) {
    const meta = document.createElement("div");
    meta.className = "meta";
    meta.textContent = m.meta;
    div.append(meta);
  }
  return div;
}

function setBusy(busy) {
  $("send").hidden = busy;
  $("stop").hidden = !busy;
  document.body.dataset.busy = busy ? "1" : "";
}

function save() {
  store.set("messages", messages.map(({ role, content, reasoning, meta, state }) =>
    ({ role, content, reasoning, meta, state: state === "streaming" ? "stopped" : state })));
}

// readEvents calls onData with each SSE data payload.
async function readEvents(resp, onData) {
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const event = buf.slice(0, i);
      buf = buf.slice(i + 2);
      for (const line of event.split("\n")) {
        if (line.startsWith("data: ")) onData(line.slice(6));
      }
    }
  }
}

async function send(text) {
  showError("");
  messages.push({ role: "user", content: text });
  const answer = { role: "assistant", content: "", reasoning: "", state: "streaming" };
  messages.push(answer);
  render();
  save();
  setBusy(true);
  controller = new AbortController();
  const started = performance.now();
  let firstAt = 0, chunks = 0, timings = null, usage = null;
  const body = {
    model, stream: true, stream_options: { include_usage: true },
    max_tokens: Number($("max-tokens").value) || undefined,
    temperature: Number($("temperature").value),
    messages: messages.filter((m) => m !== answer).map((m) => ({ role: m.role, content: m.content })),
  };
  try {
    const resp = await fetch("/v1/chat/completions", { method: "POST", headers: headers(), body: JSON.stringify(body), signal: controller.signal });
    if (!resp.ok) throw new Error(await apiError(resp));
    await readEvents(resp, (data) => {
      if (data === "[DONE]") return;
      const j = JSON.parse(data);
      if (j.error) throw new Error(j.error.message || "generation failed");
      if (j.timings) timings = j.timings;
      if (j.usage) usage = j.usage;
      const d = j.choices && j.choices[0] && j.choices[0].delta;
      if (!d) return;
      if (d.content || d.reasoning_content) {
        if (!firstAt) firstAt = performance.now();
        chunks++;
        answer.content += d.content || "";
        answer.reasoning += d.reasoning_content || "";
        render();
      }
    });
    answer.state = "done";
  } catch (e) {
    if (e.name === "AbortError") {
      answer.state = "stopped";
    } else {
      answer.state = "error";
      showError(e.message);
    }
  }
  answer.meta = speedText(timings, usage, chunks, firstAt, started);
  $("speed").textContent = answer.meta;
  controller = null;
  setBusy(false);
  render();
  save();
}

// speedText prefers the server's timings; a stopped answer has none, so
// the page measures its own.
function speedText(t, usage, chunks, firstAt, started) {
  if (t && t.predicted_per_second) {
    return t.predicted_n + " tokens · " + t.predicted_per_second.toFixed(1) + " tok/s · first token " + Math.round(t.ttft_ms) + " ms";
  }
  const n = usage ? usage.completion_tokens : chunks;
  if (!firstAt || n < 2) return n + " tokens";
  const secs = (performance.now() - firstAt) / 1000;
  return n + " tokens · " + ((n - 1) / secs).toFixed(1) + " tok/s · first token " + Math.round(firstAt - started) + " ms";
}

function init() {
  $("api-key").value = store.get("apiKey", "");
  $("max-tokens").value = store.get("maxTokens", "") || "";
  $("temperature").value = store.get("temperature", 0.7);
  $("api-key").addEventListener("change", () => { store.set("apiKey", $("api-key").value.trim()); loadModel(); });
  // Empty: the server's limit (what the context leaves).
  $("max-tokens").addEventListener("change", () => store.set("maxTokens", Number($("max-tokens").value) || ""));
  $("temperature").addEventListener("change", () => store.set("temperature", Number($("temperature").value)));
  $("new-chat").addEventListener("click", () => { if (controller) controller.abort(); messages = []; save(); render(); });
  $("stop").addEventListener("click", () => { if (controller) controller.abort(); });
  $("composer").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const text = $("input").value.trim();
    if (!text || controller) return;
    $("input").value = "";
    send(text);
  });
  $("input").addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); $("composer").requestSubmit(); }
  });
  render();
  loadModel();
}

init();
