package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/mlxcel/mlxcel/internal/chat"
)

// toolDef is one function of a request's "tools".
type toolDef struct {
	Name       string
	Parameters json.RawMessage // the JSON Schema of the arguments; may be empty
}

// parseTools validates "tools": a list of {"type": "function",
// "function": {"name", "description"?, "parameters"?}}.
func parseTools(raw json.RawMessage) ([]toolDef, *apiError) {
	if isNull(raw) {
		return nil, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil, badRequest("tools", "'tools' must be a list of {\"type\": \"function\", \"function\": {...}} objects.")
	}
	tools := make([]toolDef, 0, len(items))
	for i, it := range items {
		var t struct {
			Type     *string `json:"type"`
			Function *struct {
				Name       *string         `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		param := fmt.Sprintf("tools[%d]", i)
		if json.Unmarshal(it, &t) != nil || t.Type == nil {
			return nil, badRequest(param, "tools[%d] must be an object with \"type\": \"function\".", i)
		}
		if *t.Type != "function" {
			return nil, badRequest(param+".type", "tools[%d].type is %q; only \"function\" tools are supported.", i, *t.Type)
		}
		if t.Function == nil || t.Function.Name == nil || *t.Function.Name == "" {
			return nil, badRequest(param+".function.name", "tools[%d].function must have a non-empty \"name\".", i)
		}
		if p := t.Function.Parameters; !isNull(p) && !isObject(p) {
			return nil, badRequest(param+".function.parameters", "tools[%d].function.parameters must be a JSON Schema object.", i)
		}
		if slices.ContainsFunc(tools, func(d toolDef) bool { return d.Name == *t.Function.Name }) {
			return nil, badRequest(param+".function.name", "Two tools are named %q.", *t.Function.Name)
		}
		tools = append(tools, toolDef{Name: *t.Function.Name, Parameters: t.Function.Parameters})
	}
	return tools, nil
}

// toolChoice is the request's "tool_choice": none, auto, required, or
// the named function (mode "function").
type toolChoice struct {
	mode string
	name string
}

func parseToolChoice(raw json.RawMessage, tools []toolDef) (toolChoice, *apiError) {
	if isNull(raw) {
		if len(tools) == 0 {
			return toolChoice{mode: "none"}, nil
		}
		return toolChoice{mode: "auto"}, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "none", "auto":
			return toolChoice{mode: s}, nil
		case "required":
			if len(tools) == 0 {
				return toolChoice{}, badRequest("tool_choice", "tool_choice \"required\" needs 'tools'.")
			}
			return toolChoice{mode: s}, nil
		}
		return toolChoice{}, badRequest("tool_choice", "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}, got %q.", s)
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &named) != nil || named.Type != "function" || named.Function.Name == "" {
		return toolChoice{}, badRequest("tool_choice", "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}.")
	}
	if !slices.ContainsFunc(tools, func(d toolDef) bool { return d.Name == named.Function.Name }) {
		return toolChoice{}, badRequest("tool_choice", "tool_choice names the function %q, which is not among 'tools'.", named.Function.Name)
	}
	return toolChoice{mode: "function", name: named.Function.Name}, nil
}

// historyToolCalls reads an assistant message's tool_calls for the
// template. OpenAI sends function.arguments as a JSON string; templates
// expect a mapping (Llama 3.1 would print the string with tojson, quoted
// twice), so, as transformers' users and vLLM do, a string holding a JSON
// object is passed as that object, its key order kept.
func historyToolCalls(raw []json.RawMessage, i int) ([]map[string]any, *apiError) {
	if len(raw) == 0 {
		return nil, nil
	}
	out := make([]map[string]any, 0, len(raw))
	for j, r := range raw {
		param := fmt.Sprintf("messages[%d].tool_calls[%d]", i, j)
		var tc struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function *struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		}
		if json.Unmarshal(r, &tc) != nil || tc.Function == nil {
			return nil, badRequest(param, "%s must be {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}.", param)
		}
		if tc.Function.Name == "" {
			return nil, badRequest(param+".function.name", "%s.function has no name.", param)
		}
		args, e := historyArguments(tc.Function.Arguments, param+".function.arguments")
		if e != nil {
			return nil, e
		}
		call := map[string]any{"type": "function", "function": map[string]any{"name": tc.Function.Name, "arguments": args}}
		if tc.ID != "" {
			call["id"] = tc.ID
		}
		out = append(out, call)
	}
	return out, nil
}

func historyArguments(raw json.RawMessage, param string) (any, *apiError) {
	if isNull(raw) {
		return json.RawMessage("{}"), nil
	}
	if isObject(raw) {
		return raw, nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil, badRequest(param, "%s must be a JSON string (or object).", param)
	}
	if b := bytes.TrimSpace([]byte(s)); isObject(b) {
		return json.RawMessage(b), nil
	}
	return s, nil // not an object: the template gets the text as sent
}

// reasoningEfforts are OpenAI's reasoning_effort values.
var reasoningEfforts = []string{"none", "minimal", "low", "medium", "high"}

func (req *chatRequest) checkReasoningEffort() *apiError {
	if e := req.ReasoningEffort; e != nil && !slices.Contains(reasoningEfforts, *e) {
		return badRequest("reasoning_effort", "reasoning_effort must be one of none, minimal, low, medium, high; got %q.", *e)
	}
	return nil
}

// templateKwargs are the template variables of a request:
// chat_template_kwargs, then enable_thinking and reasoning_effort mapped
// onto what the template reads (explicit kwargs win).
func (req *chatRequest) templateKwargs(a agentModel) map[string]any {
	extra := make(map[string]any, len(req.ChatTemplateKwargs)+3)
	for k, v := range req.ChatTemplateKwargs {
		extra[k] = v
	}
	setDefault := func(k string, v any) {
		if _, ok := extra[k]; !ok {
			extra[k] = v
		}
	}
	if req.EnableThinking != nil {
		setDefault("enable_thinking", *req.EnableThinking)
	}
	if e := req.ReasoningEffort; e != nil {
		if a.readsReasoningEffort || !a.readsEnableThinking {
			setDefault("reasoning_effort", *e)
		}
		if a.readsEnableThinking {
			setDefault("enable_thinking", *e != "none")
		}
	}
	return extra
}

// historyMessage converts one request message for the template; a
// template that reads message.thinking gets reasoning_content there too.
func historyMessage(in chatMessageIn, i int, content any, a agentModel) (chat.Message, *apiError) {
	calls, e := historyToolCalls(in.ToolCalls, i)
	if e != nil {
		return chat.Message{}, e
	}
	role := in.Role
	if role == "developer" {
		role = "system" // OpenAI's newer name; templates know "system"
	}
	msg := chat.Message{Role: role, Content: content, Name: in.Name, ToolCalls: calls, ToolCallID: in.ToolCallID}
	if in.ReasoningContent != nil && *in.ReasoningContent != "" {
		msg.Extra = map[string]any{"reasoning_content": *in.ReasoningContent}
		if a.readsThinking {
			msg.Extra["thinking"] = *in.ReasoningContent
		}
	}
	return msg, nil
}

func isNull(raw json.RawMessage) bool {
	b := bytes.TrimSpace(raw)
	return len(b) == 0 || string(b) == "null"
}

func isObject(raw []byte) bool {
	b := bytes.TrimSpace(raw)
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}
