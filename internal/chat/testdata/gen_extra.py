"""Generate extra.golden.json: chat-template renders beyond the shared goldens.

The shared goldens (shared/testdata/templates/renders.golden.json) come from
transformers' apply_chat_template but only cover plain text conversations. The
tool, reasoning, multimodal-part and error paths of the same templates, plus a
few helper-heavy inline templates, are rendered here with plain jinja2 set up
the way transformers' render_jinja_template sets it up (sandboxed environment,
trim_blocks, lstrip_blocks, loopcontrols, a no-op {% generation %} tag, its
tojson/raise_exception/strftime_now, and tools/documents always passed, None
when absent). transformers itself is not installed on the dev machines; this
is the closest reference available offline.

Run from the repo root: python3 internal/chat/testdata/gen_extra.py
"""

import json
from datetime import datetime
from pathlib import Path

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent.parent.parent / "shared" / "testdata" / "templates"


class Generation(jinja2.ext.Extension):
    # transformers' AssistantTracker: {% generation %} only marks spans.
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body).set_lineno(lineno)


def _raise(message):
    raise TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                      separators=separators, sort_keys=sort_keys)


def env():
    e = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                      extensions=[Generation, jinja2.ext.loopcontrols])
    e.filters["tojson"] = _tojson
    e.globals["raise_exception"] = _raise
    e.globals["strftime_now"] = lambda f: datetime.now().strftime(f)
    return e


TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather",
        "description": "Get the weather <b>now</b> & later, température in °C 🌡",
        "parameters": {"type": "object", "properties": {
            "location": {"type": "string", "description": "City, e.g. \"Paris\""},
            "unit": {"type": "string", "enum": ["c", "f"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 14, "default": 1.0}},
            "required": ["location"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the web.\nReturns\ttop hits.",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string"}, "threshold": {"type": "number", "default": 0.25},
            "big": {"type": "number", "default": 1e16}, "tiny": {"type": "number", "default": 1.5e-7},
            "flag": {"type": "boolean", "default": False}, "nothing": None},
            "required": ["query"]}}},
]

TOOL_CONV = [
    {"role": "system", "content": "You are a weather bot."},
    {"role": "user", "content": "Weather in Zürich?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {
            "name": "get_weather", "arguments": {"location": "Zürich", "unit": "c", "days": 2, "ratio": 0.5}}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21.5}"},
    {"role": "user", "content": "And tomorrow?"},
]

QWEN_MULTI_TOOL = [
    {"role": "user", "content": "Weather in Paris and Rome?"},
    {"role": "assistant", "content": "Let me check.", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"location": "Paris"}}},
        {"type": "function", "function": {"name": "get_weather", "arguments": "{\"location\": \"Rome\"}"}}]},
    {"role": "tool", "content": "sunny"},
    {"role": "tool", "content": "rainy"},
]

THINK_CONV = [
    {"role": "user", "content": "2+2?"},
    {"role": "assistant", "content": "<think>\nadd them\n</think>\n\n4"},
    {"role": "user", "content": "3+3?"},
    {"role": "assistant", "content": "<think>\nagain\n</think>\n\n6"},
]

REASONING_CONV = [
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello", "reasoning_content": "\nbe nice\n"},
]

GEMMA_PARTS = [
    {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
    {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "  What is this?  "}]},
    {"role": "assistant", "content": [{"type": "text", "text": "A cat."}]},
    {"role": "user", "content": "Thanks"},
]

MISTRAL_PARTS = [
    {"role": "system", "content": "Sys one."},
    {"role": "system", "content": [{"type": "text", "text": "Sys two."}]},
    {"role": "user", "content": "First"},
    {"role": "user", "content": [{"type": "text", "text": "Second"}]},
    {"role": "assistant", "content": "Answer"},
    {"role": "user", "content": "Again"},
]

# Helper-heavy inline template. It avoids printing a float or None directly
# ("{{ 2.0 }}", "{{ none }}") and "{}}" inside a tag: the Go engine spells
# those differently or cannot parse them (docs/chat-templates.md lists these).
HELPERS = """{%- set ns = namespace(n=0, seen=[]) -%}
{%- for m in messages -%}
{%- if m.role == 'system' %}{% continue %}{% endif -%}
{%- if loop.index > 4 %}{% break %}{% endif -%}
{%- set ns.n = ns.n + 1 -%}
{%- set ns.seen = ns.seen + [m.role] -%}
[{{ loop.index0 }}/{{ loop.length }}{{ '|first' if loop.first }}{{ '|last' if loop.last }}] {{ m.content | trim }}
{%- if m.content is string %} words={{ m.content.split() | length }} up={{ m.content.strip().upper() }}{% endif %}
{%- if m.content.startswith('Hello') %} hello{% endif %}{% if m.content.endswith('?') %} question{% endif %}
{% endfor -%}
n={{ ns.n }} roles={{ ns.seen | join(',') }} {{ meta is mapping }} {{ meta.items() | list | length }} {{ 'x' is string }} {{ 3 is string }}
{% for k, v in meta | items %}{{ k }}={{ v if k != 'whole' else '(float)' }};{% endfor %}
{{ meta | tojson }}
{{ meta | tojson(indent=2) }}
{{ {'b': 1, 'a': [1, 2.5, none, true, 'é"\\\\\t'], 'c': {} } | tojson }}
{{ meta.get('missing', 'dflt') }} {{ meta['flag'] }} {{ 7 // 2 }} {{ 7 / 2 }} {{ 2 ** 3 }} {{ 10 % 4 }} {{ 'a' ~ 1 }}
{{ messages | map(attribute='role') | join(' ') }} {{ messages | selectattr('role', 'equalto', 'user') | list | length }} {{ [3, 1, 2] | sort | join }} {{ 'abc'[::-1] }} {{ messages[-1].role }}
{%- generation %} gen {{ 'ok' | upper }}{% endgeneration %}
{% if add_generation_prompt %}<gen>{% endif %}"""

HELPERS_MSGS = [
    {"role": "system", "content": "skip me"},
    {"role": "user", "content": "  Hello there, how are you?  "},
    {"role": "assistant", "content": "Fine"},
    {"role": "user", "content": "Hello again"},
]

HELPERS_META = {"zeta": 1, "alpha": "a<b>&c", "flag": True, "ratio": 2.5, "whole": 2.0, "list": [1, "x"], "uni": "日本\u2028"}


# Lexer corner cases: jinja2's whitespace control around expressions,
# lstrip/trim_blocks, "+" modifiers, comments, raw blocks, a trailing newline,
# CRLF line ends, Python string escapes and number spellings.
LEXER = {
    "ws/trim_after_expr": "{%- if true -%}<|system|>Reasoning Effort: {{ x | capitalize }}{%- endif -%}\n  {{ x }} {%- if true %} B {% endif %}",
    "ws/lstrip_after_expr": "A\n  {{ x }}{% if true %}\n    in\n  {% endif %}\n{{ x }}\n  {% for i in [1, 2] %}\n  {{ i }}\n  {% endfor %}\nend\n",
    "ws/trim_blocks_after_expr": "{% if true %}{{ x }}\nkept{% endif %}\n{% if true %}\nstripped{% endif %}",
    "ws/plus_modifiers": "a\n    {%+ if true %}x{% endif +%}\nb\n  {#+ c #}\n  {%- if true +%}\ny{% endif %}",
    "ws/comments": "a  {#- one -#}  b\n  {# two #}\nc{#+ three +#}\n\td {#- four #}\n",
    "ws/raw": "r: {% raw %}{{ not a tag }} {% if %}{% endraw %}|\n  {%- raw -%}\n  {{ x }}\n  {%- endraw %}\n|\n  {%+ raw %}  z  {%+ endraw %}|",
    "ws/crlf_trailing": "line1\r\n{% if true %}\r\n  yes\r\n{% endif %}\r\nlast {{ x }}\r\n",
    "ws/unicode_space": "a\u3000{%- if true -%}\u00a0b\u2003{%- endif %}",
    "lex/strings": "{{ '\\x41\\u00e9\\101|\\r|\\q|\\'|\\\"' }}|{{ \"tab\\there\" }}|{{ 'multi\nline' }}",
    "lex/numbers": "{{ 1e3 | int }}|{{ 2.5e-1 }}|{{ 1_000 + 1 }}|{{ 0x1f }}|{{ 0b101 }}|{{ 0o17 }}|{{ [1e3, 7] | tojson }}|{{ {'a': {'b': 1}} | tojson }}|{{ {'c': {}} }}",
}


def case(name, template, messages, agp, bos, eos, extra, source=None):
    return {"name": name, "template": template, "template_source": source,
            "messages": messages, "add_generation_prompt": agp,
            "bos_token": bos, "eos_token": eos, "extra_context": extra}


CASES = [
    case("qwen2_5/tools", "qwen2_5.jinja", TOOL_CONV[:2], True, None, "<|im_end|>", {"tools": TOOLS}),
    case("qwen2_5/tool_calls", "qwen2_5.jinja", TOOL_CONV, True, None, "<|im_end|>", {"tools": TOOLS}),
    case("qwen2_5/multi_tool", "qwen2_5.jinja", QWEN_MULTI_TOOL, True, None, "<|im_end|>", {}),
    case("qwen3/tools", "qwen3.jinja", TOOL_CONV[:2], True, None, "<|im_end|>", {"tools": TOOLS}),
    case("qwen3/tool_calls", "qwen3.jinja", TOOL_CONV, True, None, "<|im_end|>", {"tools": TOOLS}),
    case("qwen3/multi_tool", "qwen3.jinja", QWEN_MULTI_TOOL, True, None, "<|im_end|>", {}),
    case("qwen3/think_history", "qwen3.jinja", THINK_CONV, False, None, "<|im_end|>", {}),
    case("qwen3/reasoning_content", "qwen3.jinja", REASONING_CONV, False, None, "<|im_end|>", {}),
    case("qwen3/no_thinking", "qwen3.jinja", THINK_CONV[:3], True, None, "<|im_end|>", {"enable_thinking": False}),
    case("qwen3/thinking_true", "qwen3.jinja", THINK_CONV[:3], True, None, "<|im_end|>", {"enable_thinking": True}),
    case("llama3_1/tools_in_user", "llama3_1.jinja", TOOL_CONV[:2], True, "<|begin_of_text|>", "<|eot_id|>",
         {"tools": TOOLS, "date_string": "01 Jan 2025"}),
    case("llama3_1/tools_in_system", "llama3_1.jinja", TOOL_CONV, True, "<|begin_of_text|>", "<|eot_id|>",
         {"tools": TOOLS, "tools_in_user_message": False}),
    case("llama3_1/builtin_tools", "llama3_1.jinja", [
        {"role": "user", "content": "Search news"},
        {"role": "assistant", "tool_calls": [{"type": "function", "function": {
            "name": "brave_search", "arguments": {"query": "news", "count": "3"}}}]},
        {"role": "ipython", "content": {"results": ["a", "b"]}},
    ], True, "<|begin_of_text|>", "<|eot_id|>",
        {"builtin_tools": ["brave_search", "code_interpreter", "wolfram_alpha"]}),
    case("llama3_1/no_date", "llama3_1.jinja", TOOL_CONV[:2], False, "<|begin_of_text|>", "<|eot_id|>", {}),
    case("gemma3/parts", "gemma3.jinja", GEMMA_PARTS, True, "<bos>", "<eos>", {}),
    case("mistral_v1/merge", "mistral_v1.jinja", MISTRAL_PARTS, True, "<s>", "</s>", {}),
    case("helpers/inline", None, HELPERS_MSGS, True, "<s>", "</s>", {"meta": HELPERS_META}, HELPERS),
    *[case(n, None, [{"role": "user", "content": "hi"}], False, None, None, {"x": "max"}, src)
      for n, src in LEXER.items()],
    # Error paths: raise_exception must surface as a render error.
    case("gemma3/alternation_error", "gemma3.jinja", [
        {"role": "user", "content": "a"}, {"role": "user", "content": "b"}], True, "<bos>", "<eos>", {}),
    case("mistral_v1/start_error", "mistral_v1.jinja", [
        {"role": "assistant", "content": "hi"}], True, "<s>", "</s>", {}),
    case("llama3_1/two_calls_error", "llama3_1.jinja", [
        {"role": "user", "content": "x"},
        {"role": "assistant", "tool_calls": [
            {"function": {"name": "a", "arguments": {}}}, {"function": {"name": "b", "arguments": {}}}]}],
        True, "<|begin_of_text|>", "<|eot_id|>", {}),
]


def main():
    e = env()
    out = []
    for c in CASES:
        src = c["template_source"] or (SHARED / c["template"]).read_text()
        tmpl = e.from_string(src)
        ctx = {"tools": None, "documents": None, "bos_token": c["bos_token"], "eos_token": c["eos_token"]}
        ctx.update(c["extra_context"])
        try:
            c["rendered"] = tmpl.render(messages=c["messages"], add_generation_prompt=c["add_generation_prompt"], **ctx)
        except TemplateError as err:
            c["error"] = str(err)
        out.append(c)
    doc = {"produced_by": f"jinja2 {jinja2.__version__} with transformers' chat-template environment (gen_extra.py)",
           "cases": out}
    (HERE / "extra.golden.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
