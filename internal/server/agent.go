package server

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mlxcel/mlxcel/internal/app"
	"github.com/mlxcel/mlxcel/internal/chat"
	"github.com/mlxcel/mlxcel/internal/reasoning"
	"github.com/mlxcel/mlxcel/internal/tokenizer"
	"github.com/mlxcel/mlxcel/internal/toolcall"
)

// AgentOptions choose how chat answers are read back (docs/tools.md).
type AgentOptions struct {
	// ToolCallParser names the tool-call syntax (toolcall.Parsers; "none"
	// turns parsing off); empty picks it from the chat template and the
	// model_type.
	ToolCallParser string
	// ReasoningParser names the thinking syntax (reasoning.Parsers,
	// "none"); empty picks it the same way.
	ReasoningParser string
	// ChatTemplate is a Jinja file used instead of the model's template.
	ChatTemplate string
}

func (o *AgentOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.ToolCallParser, "tool-call-parser", "", "tool-call syntax: "+strings.Join(toolcall.Parsers(), ", ")+
		" or none (default: from the chat template and model type)")
	fs.StringVar(&o.ReasoningParser, "reasoning-parser", "", "thinking syntax: "+strings.Join(reasoning.Parsers(), ", ")+
		" or none (default: from the chat template and model type)")
	fs.StringVar(&o.ChatTemplate, "chat-template", "", "Jinja chat template file to use instead of the model's")
}

func (o *AgentOptions) check() error {
	if p := o.ToolCallParser; p != "" && p != "none" && !toolcall.Known(p) {
		return fmt.Errorf("--tool-call-parser %q: known parsers are %s, none", p, strings.Join(toolcall.Parsers(), ", "))
	}
	if p := o.ReasoningParser; p != "" && p != "none" && !reasoning.Known(p) {
		return fmt.Errorf("--reasoning-parser %q: known parsers are %s, none", p, strings.Join(reasoning.Parsers(), ", "))
	}
	return nil
}

// agentModel is what a served model's answers are parsed with.
type agentModel struct {
	toolParser      string // "" none
	reasoningParser string // "" none
	// keepSpecial: the parsers' markup includes tokens the tokenizer
	// marks special (Gemma 4, Mistral), so the decoder must keep them.
	keepSpecial bool
	// The template's own kwargs, so reasoning_effort maps onto the one
	// it reads.
	readsEnableThinking, readsReasoningEffort bool
	// readsThinking: the template takes an assistant turn's reasoning as
	// message.thinking (gpt-oss) rather than reasoning_content.
	readsThinking bool
}

// setupAgent loads the --chat-template override and picks the parsers.
func (o *AgentOptions) setupAgent(l *app.Loaded) (*chat.Template, agentModel, error) {
	tmpl := l.Template
	if o.ChatTemplate != "" {
		src, err := os.ReadFile(o.ChatTemplate)
		if err != nil {
			return nil, agentModel{}, fmt.Errorf("--chat-template: %v", err)
		}
		bos, eos := specialTokens(l)
		if tmpl, err = chat.Parse(string(src), bos, eos); err != nil {
			return nil, agentModel{}, fmt.Errorf("--chat-template %s: %v", o.ChatTemplate, err)
		}
	}
	if tmpl == nil {
		// The plain fallback (plainchat.go) has no syntax to parse.
		return nil, agentModel{toolParser: pick(o.ToolCallParser, ""), reasoningParser: pick(o.ReasoningParser, "")}, nil
	}
	src, modelType := tmpl.Source(), l.Model.Cfg.ModelType
	a := agentModel{
		toolParser:           pick(o.ToolCallParser, toolcall.Detect(src, modelType)),
		reasoningParser:      pick(o.ReasoningParser, reasoning.Detect(src, modelType)),
		readsEnableThinking:  strings.Contains(src, "enable_thinking"),
		readsReasoningEffort: strings.Contains(src, "reasoning_effort"),
		readsThinking:        strings.Contains(src, "message.thinking") || strings.Contains(src, `"thinking" in message`),
	}
	var markers []string
	if a.toolParser != "" {
		markers = append(markers, toolcall.Markers(a.toolParser)...)
	}
	if a.reasoningParser != "" {
		markers = append(markers, reasoning.Markers(a.reasoningParser)...)
	}
	a.keepSpecial = anySpecial(l.Tokenizer, markers)
	return tmpl, a, nil
}

// pick applies a flag: "none" is off, empty takes the detected value.
func pick(flagValue, detected string) string {
	switch flagValue {
	case "none":
		return ""
	case "":
		return detected
	}
	return flagValue
}

func anySpecial(tok *tokenizer.Tokenizer, markers []string) bool {
	for _, m := range markers {
		if id, ok := tok.TokenID(m); ok && tok.IsSpecial(id) {
			return true
		}
	}
	return false
}

// specialTokens are the bos_token and eos_token a template sees, from
// tokenizer_config.json (a string or an AddedToken object), else the
// tokenizer's own.
func specialTokens(l *app.Loaded) (bos, eos string) {
	var cfg map[string]json.RawMessage
	if b, err := os.ReadFile(filepath.Join(l.Dir, "tokenizer_config.json")); err == nil {
		json.Unmarshal(b, &cfg)
	}
	read := func(key string, id int32, ok bool) string {
		var s string
		if json.Unmarshal(cfg[key], &s) == nil && s != "" {
			return s
		}
		var obj struct{ Content string }
		if json.Unmarshal(cfg[key], &obj) == nil && obj.Content != "" {
			return obj.Content
		}
		if ok {
			return l.Tokenizer.TokenString(id)
		}
		return ""
	}
	bid, bok := l.Tokenizer.BOS()
	eid, eok := l.Tokenizer.EOS()
	return read("bos_token", bid, bok), read("eos_token", eid, eok)
}
