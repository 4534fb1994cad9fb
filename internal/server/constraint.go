package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/generate"
	"github.com/mlxcel/mlxcel/internal/grammar"
	"github.com/mlxcel/mlxcel/internal/reasoning"
)

// Constrained decoding (docs/constrained-decoding.md): response_format
// json_object / json_schema and forced tool calls become a
// grammar.Matcher on the engine request.

// responseFormat is OpenAI's response_format.
type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	} `json:"json_schema"`
}

// responseFormatConstraint reads response_format: nil for none or text,
// a matcher for json_object and json_schema (strict or not: the schema
// is enforced either way), a 400 naming the parameter otherwise.
func (m *served) responseFormatConstraint(raw json.RawMessage, o grammar.Options) (engine.Constraint, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var rf responseFormat
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&rf); err != nil {
		return nil, badRequest("response_format", "'response_format' must be an object with a 'type': %v", err)
	}
	var key string
	var compile func() (*grammar.Grammar, error)
	switch rf.Type {
	case "text":
		return nil, nil
	case "json_object":
		key = "json_object"
		compile = func() (*grammar.Grammar, error) { return grammar.JSONObject(o) }
	case "json_schema":
		if rf.JSONSchema == nil || len(rf.JSONSchema.Schema) == 0 || string(rf.JSONSchema.Schema) == "null" {
			return nil, badRequest("response_format.json_schema.schema", "response_format of type 'json_schema' needs 'json_schema.schema'.")
		}
		schema := rf.JSONSchema.Schema
		key = "schema:" + canonicalJSON(schema)
		compile = func() (*grammar.Grammar, error) { return grammar.CompileSchema(schema, o) }
	default:
		return nil, badRequest("response_format.type", "Unknown response_format type %q; expected 'text', 'json_object' or 'json_schema'.", rf.Type)
	}
	t, err := m.grammars().tableFor(thinkKey(o)+key, compile)
	if err != nil {
		return nil, badRequest("response_format.json_schema.schema", "The schema cannot be enforced: %v", err)
	}
	return t.NewMatcher(m.stopIDs), nil
}

// maxForcedCalls bounds the calls of tool_choice "required" with
// parallel calls allowed: each position is a copy of the call automaton,
// so the compile grows with it.
const maxForcedCalls = 4

// forcedToolCall is the constraint of tool_choice "required" (tools: all
// the request's tools) or of a named function (tools: just it): 1 to
// calls calls in the call syntax of parser (a toolcall parser name), the
// arguments constrained by the tool's parameter schema.
func (m *served) forcedToolCall(parser string, tools []grammar.Tool, calls int, o grammar.Options) (engine.Constraint, *apiError) {
	var key strings.Builder
	fmt.Fprintf(&key, "%stool:%s:%d", thinkKey(o), parser, calls)
	for _, t := range tools {
		// Length-prefixed: no name or schema can spell a boundary.
		params := canonicalJSON(t.Parameters)
		fmt.Fprintf(&key, "|%d:%s|%d:%s", len(t.Name), t.Name, len(params), params)
	}
	gs := m.grammars()
	o.Specials = gs.specials
	t, err := gs.tableFor(key.String(), func() (*grammar.Grammar, error) {
		return grammar.ToolCalls(parser, tools, calls, o)
	})
	if err != nil {
		return nil, badRequest("tool_choice", "The forced tool call cannot be enforced: %v", err)
	}
	return t.NewMatcher(m.stopIDs), nil
}

// cloneConstraint gives each choice of an n > 1 request its own matcher:
// a matcher follows one sequence.
func cloneConstraint(c engine.Constraint) engine.Constraint {
	if m, ok := c.(*grammar.Matcher); ok {
		return m.Clone()
	}
	return c
}

// constrain sets greq's constraint: forced tool calls for tool_choice
// "required" (up to maxForcedCalls when parallel) or a named function
// (one call, as OpenAI's named choice), in the model's call syntax, else the
// response_format's JSON, else none. prompt is the rendered chat: with a
// <think> reasoning model the answer may think first (required when the
// prompt opened the thought), and the constraint starts after it.
func (m *served) constrain(greq *generate.Request, responseFormat json.RawMessage, choice toolChoice, tools []toolDef, parallel bool, prompt string) *apiError {
	var forced []grammar.Tool
	for _, t := range tools {
		if choice.mode == "required" || (choice.mode == "function" && choice.name == t.Name) {
			forced = append(forced, grammar.Tool{Name: t.Name, Parameters: t.Parameters})
		}
	}
	var o grammar.Options
	if p := m.agent.reasoningParser; p == "think" {
		mk := reasoning.Markers(p)
		o.Think = &grammar.Thinking{Open: mk[0], Close: mk[1], Opened: reasoning.OpenedIn(p, prompt)}
	}
	c, e := m.responseFormatConstraint(responseFormat, o)
	if e != nil {
		return e
	}
	if len(forced) > 0 {
		if m.agent.toolParser == "" {
			return badRequest("tool_choice", "tool_choice %q needs the model's tool-call syntax, which is unknown for %s (set --tool-call-parser).", choice.mode, m.name)
		}
		calls := 1
		if parallel && choice.mode == "required" {
			calls = maxForcedCalls
		}
		if c, e = m.forcedToolCall(m.agent.toolParser, forced, calls, o); e != nil {
			return e
		}
	}
	if c != nil {
		greq.Constraint = c
	}
	return nil
}

// thinkKey tells apart the cached grammars of one source compiled with
// and without a thought before the value.
func thinkKey(o grammar.Options) string {
	if t := o.Think; t != nil {
		return fmt.Sprintf("think:%v:", t.Opened)
	}
	return ""
}
