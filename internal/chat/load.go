package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Where transformers looks for a model's chat templates, in its order:
// chat_template.jinja beside the tokenizer (written by transformers since
// 4.50), with further named templates in additional_chat_templates/NAME.jinja,
// and otherwise the chat_template field of tokenizer_config.json, which is
// either one template string or a list of {"name": ..., "template": ...}.
// Last comes chat_template.json, where processors of multimodal models keep
// theirs.
const (
	templateFile          = "chat_template.jinja"
	extraTemplatesDir     = "additional_chat_templates"
	tokenizerConfigFile   = "tokenizer_config.json"
	processorTemplateFile = "chat_template.json"
)

// ErrNoTemplate is Load's error for a directory without any chat
// template; every other error is a template (or its file) that is broken.
var ErrNoTemplate = errors.New("no chat template")

// Load reads a model directory's chat template (the default one, with any
// named ones reachable through Named) and its bos/eos tokens from
// tokenizer_config.json. Errors name the file at fault.
func Load(dir string) (*Template, error) {
	cfg, cfgErr := readTokenizerConfig(dir)
	if cfgErr != nil && !errors.Is(cfgErr, fs.ErrNotExist) {
		return nil, cfgErr
	}
	bos, eos := cfg.token("bos_token"), cfg.token("eos_token")

	sources := map[string]string{}
	var from map[string]string // template name -> where it came from, for errors
	jinjaPath := filepath.Join(dir, templateFile)
	src, err := os.ReadFile(jinjaPath)
	switch {
	case err == nil:
		sources["default"] = string(src)
		from = map[string]string{"default": jinjaPath}
		if err := readExtraTemplates(dir, sources, from); err != nil {
			return nil, err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("chat: %w", err)
	default:
		cfgPath := filepath.Join(dir, tokenizerConfigFile)
		field := cfg.raw["chat_template"]
		if cfgErr != nil || isNull(field) {
			// Multimodal checkpoints may keep the template only in the
			// processor's chat_template.json.
			cfgPath = filepath.Join(dir, processorTemplateFile)
			proc, err := readJSONObject(cfgPath)
			if err != nil {
				return nil, err
			}
			field = proc["chat_template"]
			if isNull(field) {
				return nil, fmt.Errorf("chat: %w in %s: none of %s, a chat_template field in %s, or %s",
					ErrNoTemplate, dir, templateFile, tokenizerConfigFile, processorTemplateFile)
			}
		}
		named, err := parseTemplateField(field)
		if err != nil {
			return nil, fmt.Errorf("chat: %s: chat_template: %w", cfgPath, err)
		}
		from = map[string]string{}
		for name, s := range named {
			sources[name] = s
			from[name] = fmt.Sprintf("%s (chat_template %q)", cfgPath, name)
		}
	}

	if _, ok := sources["default"]; !ok {
		names := slices.Sorted(maps.Keys(sources))
		where := strings.TrimSuffix(from[names[0]], fmt.Sprintf(" (chat_template %q)", names[0]))
		return nil, fmt.Errorf("chat: %s: no template named \"default\" among %s", where, strings.Join(names, ", "))
	}
	all := map[string]*Template{}
	for _, name := range slices.Sorted(maps.Keys(sources)) {
		t, err := parseNamed(name, sources[name], bos, eos)
		if err != nil {
			return nil, fmt.Errorf("chat: parse %s: %w", from[name], err)
		}
		t.named = all
		all[name] = t
	}
	return all["default"], nil
}

// readExtraTemplates adds additional_chat_templates/NAME.jinja files.
func readExtraTemplates(dir string, sources, from map[string]string) error {
	extraDir := filepath.Join(dir, extraTemplatesDir)
	entries, err := os.ReadDir(extraDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("chat: %w", err)
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".jinja")
		if !ok || e.IsDir() || name == "default" {
			continue
		}
		p := filepath.Join(extraDir, e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("chat: %w", err)
		}
		sources[name] = string(b)
		from[name] = p
	}
	return nil
}

// parseTemplateField reads tokenizer_config.json's chat_template: a string
// (the default template) or a list of named templates.
func parseTemplateField(raw json.RawMessage) (map[string]string, error) {
	var single string
	if err := json.Unmarshal(raw, &single); err == nil {
		return map[string]string{"default": single}, nil
	}
	var list []struct {
		Name     *string `json:"name"`
		Template *string `json:"template"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errors.New("want a string or a list of {name, template} objects")
	}
	out := map[string]string{}
	for i, e := range list {
		if e.Name == nil || e.Template == nil {
			return nil, fmt.Errorf("entry %d lacks a name or a template", i)
		}
		out[*e.Name] = *e.Template
	}
	return out, nil
}

// tokenizerConfig is the part of tokenizer_config.json this package reads.
type tokenizerConfig struct {
	raw map[string]json.RawMessage
}

func readTokenizerConfig(dir string) (tokenizerConfig, error) {
	p := filepath.Join(dir, tokenizerConfigFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return tokenizerConfig{}, fmt.Errorf("chat: %w", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return tokenizerConfig{}, fmt.Errorf("chat: parse %s: %w", p, err)
	}
	return tokenizerConfig{raw: raw}, nil
}

// token reads a special token, stored either as a plain string or as a
// serialized AddedToken object {"content": "...", ...}; null or absent gives "".
func (c tokenizerConfig) token(key string) string {
	raw := c.raw[key]
	if raw == nil {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		return obj.Content
	}
	return ""
}
