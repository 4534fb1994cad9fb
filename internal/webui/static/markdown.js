// A small Markdown renderer for answers: fenced and inline code,
// headings, lists, bold, italics, links and paragraphs. Everything is
// escaped first, so model output can never inject markup.
"use strict";

function escapeHtml(s) {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

// inline formats one escaped line; code spans are cut out first so their
// content is left alone.
function inline(s) {
  const parts = s.split(/(`[^`]+`)/g);
  return parts.map((p, i) => {
    if (i % 2 === 1) return "<code>" + p.slice(1, -1) + "</code>";
    return p
      .replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>")
      .replace(/(^|[^*])\*([^*\s][^*]*)\*/g, "$1<em>$2</em>")
      .replace(/\[([^\]]+)\]\((https?:\/\/[^\s)]+)\)/g, '<a href="$2" rel="noopener noreferrer" target="_blank">$1</a>');
  }).join("");
}

function renderMarkdown(src) {
  const lines = src.split("\n");
  const out = [];
  let para = [];
  let list = null; // "ul" or "ol"
  const flushPara = () => { if (para.length) { out.push("<p>" + para.map(inline).join("<br>") + "</p>"); para = []; } };
  const closeList = () => { if (list) { out.push("</" + list + ">"); list = null; } };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = line.match(/^\s*```\s*([\w+-]*)/);
    if (fence) {
      flushPara(); closeList();
      const body = [];
      i++;
      // A fence still open while the answer streams runs to the end.
      while (i < lines.length && !/^\s*```\s*$/.test(lines[i])) body.push(lines[i++]);
      const lang = fence[1] ? ' class="language-' + escapeHtml(fence[1]) + '"' : "";
      out.push("<pre><code" + lang + ">" + escapeHtml(body.join("\n")) + "</code></pre>");
      continue;
    }
    const esc = escapeHtml(line);
    const h = esc.match(/^(#{1,6})\s+(.*)$/);
    const ul = esc.match(/^\s*[-*+]\s+(.*)$/);
    const ol = esc.match(/^\s*\d+[.)]\s+(.*)$/);
    if (h) {
      flushPara(); closeList();
      out.push("<h" + h[1].length + ">" + inline(h[2]) + "</h" + h[1].length + ">");
    } else if (ul || ol) {
      flushPara();
      const kind = ul ? "ul" : "ol";
      if (list !== kind) { closeList(); out.push("<" + kind + ">"); list = kind; }
      out.push("<li>" + inline((ul || ol)[1]) + "</li>");
    } else if (esc.trim() === "") {
      flushPara(); closeList();
    } else {
      closeList();
      para.push(esc);
    }
  }
  flushPara(); closeList();
  return out.join("");
}

// splitThink separates a <think>...</think> thought that reached the
// content (a server started without a reasoning parser).
function splitThink(text) {
  const m = text.match(/^\s*<think>([\s\S]*?)(<\/think>|$)([\s\S]*)$/);
  if (!m) return { reasoning: "", content: text };
  return { reasoning: m[1].trim(), content: m[3].replace(/^\s+/, "") };
}

if (typeof module !== "undefined") module.exports = { renderMarkdown, escapeHtml, splitThink };
