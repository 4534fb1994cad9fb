// Package chat turns a conversation into a model's prompt by rendering the
// model's Hugging Face chat template, aiming for output byte-identical to
// transformers' tokenizer.apply_chat_template. It also reads the stop tokens
// and default sampling settings a model ships in generation_config.json.
//
// Templates are Jinja; they run on github.com/ardanlabs/jinja (see
// docs/chat-templates.md for how it was chosen over other Go engines), set up
// the way transformers sets up jinja2: trim_blocks and lstrip_blocks,
// loop controls, the {% generation %} tag, and the raise_exception,
// strftime_now and tojson helpers.
package chat

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ardanlabs/jinja"
)

// Message is one chat turn in the OpenAI / transformers shape. A template
// receives it as a dict holding role and content (None when Content is nil)
// plus name, tool_calls and tool_call_id only when set, then every Extra key
// (e.g. "reasoning_content"). Content is a string or a list of parts such as
// []map[string]any{{"type": "text", "text": "..."}}; json.RawMessage is
// accepted anywhere for exact key order (see values.go).
type Message struct {
	Role       string           `json:"role"`
	Content    any              `json:"content"`
	Name       string           `json:"name,omitempty"`
	ToolCalls  []map[string]any `json:"tool_calls,omitempty"`
	ToolCallID string           `json:"tool_call_id,omitempty"`
	Extra      map[string]any   `json:"-"`
}

// RaiseError is the error a render returns when the template calls
// raise_exception, the templates' way of rejecting a conversation (roles
// that do not alternate, an unsupported tool call, ...). It is the caller's
// input that is wrong, so a server should answer it with a 4xx.
type RaiseError struct {
	Message string
}

func (e *RaiseError) Error() string { return "chat template rejected the conversation: " + e.Message }

// Template is a compiled chat template. It is safe for concurrent use.
type Template struct {
	name     string
	source   string
	compiled *jinja.Template
	bosToken string
	eosToken string
	// named holds every template a model ships, keyed by name, shared by
	// all of them ("default" included when the model names it).
	named map[string]*Template
	// now is the clock behind strftime_now; tests pin it.
	now func() time.Time
}

// Parse compiles a chat template. bosToken and eosToken are exposed to the
// template as bos_token and eos_token; an empty one is left undefined, as
// transformers leaves a token the tokenizer does not have.
func Parse(src string, bosToken, eosToken string) (*Template, error) {
	t, err := parseNamed("default", src, bosToken, eosToken)
	if err != nil {
		return nil, fmt.Errorf("chat: parse template: %w", err)
	}
	return t, nil
}

func parseNamed(name, src, bosToken, eosToken string) (*Template, error) {
	prepared, err := prepareSource(src)
	if err != nil {
		return nil, err
	}
	compiled, err := jinja.Compile(prepared)
	if err != nil {
		return nil, err
	}
	t := &Template{
		name:     name,
		source:   src,
		compiled: compiled,
		bosToken: bosToken,
		eosToken: eosToken,
		now:      time.Now,
	}
	t.named = map[string]*Template{name: t}
	return t, nil
}

// Name is the template's name: "default" unless it was picked with Named.
func (t *Template) Name() string { return t.name }

// Source is the template text as the model ships it.
func (t *Template) Source() string { return t.source }

// Names lists the templates the model ships, sorted (e.g. "default",
// "rag", "tool_use").
func (t *Template) Names() []string {
	return slices.Sorted(maps.Keys(t.named))
}

// Named returns one of the model's named templates, e.g. "tool_use", which
// some models ship beside the default one.
func (t *Template) Named(name string) (*Template, bool) {
	n, ok := t.named[name]
	return n, ok
}

// Render formats msgs into a prompt. addGenerationPrompt appends the header
// that opens the assistant's turn. extra holds the other template variables
// transformers passes through apply_chat_template's keyword arguments:
// "tools", "documents", "enable_thinking", "date_string", ... As in
// transformers, tools and documents are always defined (None when absent) and
// extra may override bos_token and eos_token.
//
// A template that calls raise_exception fails with a *RaiseError.
func (t *Template) Render(msgs []Message, addGenerationPrompt bool, extra map[string]any) (string, error) {
	data := make(map[string]jinja.Value, len(extra)+8)
	data["tools"] = jinja.None()
	data["documents"] = jinja.None()
	if t.bosToken != "" {
		data["bos_token"] = jinja.NewString(t.bosToken)
	}
	if t.eosToken != "" {
		data["eos_token"] = jinja.NewString(t.eosToken)
	}
	for k, v := range extra {
		val, err := toValue(v)
		if err != nil {
			return "", fmt.Errorf("chat: template variable %q: %w", k, err)
		}
		data[k] = val
	}
	messages, err := toValue(msgs)
	if err != nil {
		return "", err
	}
	data["messages"] = messages
	data["add_generation_prompt"] = jinja.NewBool(addGenerationPrompt)

	// The helpers go in the render data, where the engine looks up globals
	// and unknown filters after its own; values of the same name in extra
	// are replaced, as transformers' globals would win in jinja2 too.
	data["raise_exception"] = jinja.NewCallable("raise_exception", raiseException)
	data["strftime_now"] = jinja.NewCallable("strftime_now", t.strftimeNow)
	data[tojsonFilterName] = jinja.NewCallable("tojson", tojsonFilter)

	out, err := t.compiled.RenderValues(data)
	if err != nil {
		var re *RaiseError
		if errors.As(err, &re) {
			return "", re
		}
		return "", fmt.Errorf("chat: render %s template: %w", t.name, err)
	}
	return out, nil
}

func raiseException(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	msg := "raise_exception called"
	if len(args) > 0 {
		if args[0].IsString() {
			msg = args[0].AsString()
		} else {
			msg = args[0].String()
		}
	}
	return jinja.Undefined(), &RaiseError{Message: msg}
}

func (t *Template) strftimeNow(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) != 1 || !args[0].IsString() {
		return jinja.Undefined(), errors.New("strftime_now: expected one format string")
	}
	return jinja.NewString(pyStrftime(t.now(), args[0].AsString())), nil
}
