package server

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/mlxcel/mlxcel/internal/app"
)

// A scripted model answers each trigger with a chosen token sequence:
// real weights, loaded and run like any checkpoint, built so that greedy
// decoding follows a table. The attention and MLP weights are zero, so
// the last hidden state is the current token's embedding; each scripted
// token's embedding is a unit vector of its own, and the LM head row of
// the token that must follow it points along that vector. The tokenizer
// is stories260k's with every scripted piece added as a (non-special)
// token, so the model can emit markup such as "<tool_call>" in one step.

const scriptedEOS = 2 // stories260k's </s>

// scriptedTemplate renders tools as Hermes does (so the tool-call parser
// is detected from it), mentions <think> (the reasoning parser), keeps a
// preamble long enough to fill a KV block (prefix-cache sharing), and
// ends the prompt with the last message's content: the trigger.
const scriptedTemplate = `You are a scripted test model. Your answers are fixed in advance by your weights.
{%- if tools %}
<tools>{{ tools | tojson }}</tools>
Call a tool as <tool_call>{"name": ..., "arguments": ...}</tool_call>; think in <think></think>.
{%- endif %}
{%- for m in messages[:-1] %}
{{ m.role }}: {{ m.content }}
{%- endfor %}
{{ messages[-1].content }}`

// scripts maps a trigger to the pieces the model answers it with. Every
// piece of every script is a distinct token, so each is a distinct piece
// of text (the table is keyed by token).
var scripts = map[string][]string{
	"<s_tool>": {"Let me check.", "\n\n", "<tool_call>", "\n{\"name\": \"get_weather\", ", "\"arguments\": {\"city\": ",
		"\"Paris\", \"days\": 3}}", "\n</tool_call>", "\n<tool_call>\n", "{\"name\": \"get_time\", \"arguments\": {}}", "</tool_call>"},
	"<s_think>": {"<think>", "\nThe user wants a number.", "\nSo: 42.", "\n</think>", "\n\nIt is 42."},
	"<s_plain>": {"Hello", " world"},
	// "Bye" is reached from <s_plain> only through a logit bias.
	"Bye": {"!!"},
}

type scriptedModel struct {
	dir string
	ids map[string]int32 // piece -> token id
}

// buildScripted builds the model; the pieces listed in special are
// marked special tokens (as Mistral's and Gemma 4's markup is).
func buildScripted(t testing.TB, special ...string) *scriptedModel {
	t.Helper()
	dir := t.TempDir()
	base := filepath.Join(testdata, "models", "stories260k")
	var tj map[string]any
	b, err := os.ReadFile(filepath.Join(base, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &tj); err != nil {
		t.Fatal(err)
	}
	// The pieces in a fixed order, each an added token after the 512 of
	// the base vocabulary.
	triggers := make([]string, 0, len(scripts))
	for k := range scripts {
		triggers = append(triggers, k)
	}
	sort.Strings(triggers)
	sm := &scriptedModel{dir: dir, ids: map[string]int32{}}
	var pieces []string
	add := func(p string) {
		if _, ok := sm.ids[p]; ok {
			return
		}
		sm.ids[p] = int32(512 + len(pieces))
		pieces = append(pieces, p)
	}
	for _, k := range triggers {
		add(k)
		for _, p := range scripts[k] {
			if _, dup := sm.ids[p]; dup && p != "Bye" {
				t.Fatalf("piece %q is used twice", p)
			}
			add(p)
		}
	}
	added := tj["added_tokens"].([]any)
	for i, p := range pieces {
		added = append(added, map[string]any{"id": 512 + i, "content": p, "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": slices.Contains(special, p)})
	}
	tj["added_tokens"] = added
	writeJSONFile(t, filepath.Join(dir, "tokenizer.json"), tj)
	cfgb, _ := os.ReadFile(filepath.Join(base, "tokenizer_config.json"))
	os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), cfgb, 0o644)
	os.WriteFile(filepath.Join(dir, "chat_template.jinja"), []byte(scriptedTemplate), 0o644)

	vocab, hidden := 512+len(pieces), len(pieces)+4
	hidden = (hidden + 7) / 8 * 8
	writeJSONFile(t, filepath.Join(dir, "config.json"), map[string]any{
		"architectures": []string{"LlamaForCausalLM"}, "model_type": "llama", "hidden_size": hidden,
		"intermediate_size": 16, "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": hidden / 2,
		"num_hidden_layers": 1, "vocab_size": vocab, "max_position_embeddings": 512, "rms_norm_eps": 1e-5,
		"rope_theta": 10000.0, "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": scriptedEOS,
		"hidden_act": "silu",
	})
	// Transitions: trigger -> first piece -> ... -> last piece -> EOS.
	embed := make([]float32, vocab*hidden)
	head := make([]float32, vocab*hidden)
	for i := range pieces {
		embed[(512+i)*hidden+i] = 1
	}
	link := func(from string, to int32) { head[int(to)*hidden+int(sm.ids[from]-512)] = 1 }
	for _, k := range triggers {
		prev := k
		for _, p := range scripts[k] {
			link(prev, sm.ids[p])
			prev = p
		}
		link(prev, scriptedEOS)
	}
	ones := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	l := "model.layers.0."
	writeSafetensors(t, filepath.Join(dir, "model.safetensors"), []tensorF32{
		{"model.embed_tokens.weight", []int{vocab, hidden}, embed},
		{"lm_head.weight", []int{vocab, hidden}, head},
		{"model.norm.weight", []int{hidden}, ones(hidden)},
		{l + "input_layernorm.weight", []int{hidden}, ones(hidden)},
		{l + "post_attention_layernorm.weight", []int{hidden}, ones(hidden)},
		{l + "self_attn.q_proj.weight", []int{hidden, hidden}, make([]float32, hidden*hidden)},
		{l + "self_attn.k_proj.weight", []int{hidden, hidden}, make([]float32, hidden*hidden)},
		{l + "self_attn.v_proj.weight", []int{hidden, hidden}, make([]float32, hidden*hidden)},
		{l + "self_attn.o_proj.weight", []int{hidden, hidden}, make([]float32, hidden*hidden)},
		{l + "mlp.gate_proj.weight", []int{16, hidden}, make([]float32, 16*hidden)},
		{l + "mlp.up_proj.weight", []int{16, hidden}, make([]float32, 16*hidden)},
		{l + "mlp.down_proj.weight", []int{hidden, 16}, make([]float32, 16*hidden)},
	})
	return sm
}

// load loads the scripted model on the CPU (each test builds its own).
func (sm *scriptedModel) load(t testing.TB) *app.Loaded {
	t.Helper()
	l, err := app.Load(app.Options{ModelDir: sm.dir, Backend: "cpu", Threads: 2, Quiet: true})
	if err != nil {
		t.Fatalf("loading the scripted model: %v", err)
	}
	t.Cleanup(func() { l.Model.Backend().Close() })
	return l
}

type tensorF32 struct {
	name  string
	shape []int
	data  []float32
}

// writeSafetensors writes f32 tensors in the safetensors layout: an
// 8-byte header length, the JSON header, the data.
func writeSafetensors(t testing.TB, path string, ts []tensorF32) {
	t.Helper()
	header := map[string]any{}
	off := 0
	for _, x := range ts {
		n := len(x.data) * 4
		header[x.name] = map[string]any{"dtype": "F32", "shape": x.shape, "data_offsets": []int{off, off + n}}
		off += n
	}
	hb, _ := json.Marshal(header)
	for len(hb)%8 != 0 {
		hb = append(hb, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(hb)))
	out = append(out, hb...)
	for _, x := range ts {
		for _, v := range x.data {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
		}
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeJSONFile(t testing.TB, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestScriptedModel: greedy decoding follows the table exactly.
func TestScriptedModel(t *testing.T) {
	sm := buildScripted(t)
	l := sm.load(t)
	s := startServer(t, l, Options{})
	for trigger, want := range map[string]string{"<s_plain>": "Hello world", "<s_think>": "<think>\nThe user wants a number.\nSo: 42.\n</think>\n\nIt is 42."} {
		status, body := s.post(t, "/v1/completions", fmt.Sprintf(`{"prompt": %q, "temperature": 0, "max_tokens": 30}`, "x "+trigger))
		if status != 200 {
			t.Fatalf("%d %v", status, body)
		}
		ch := body["choices"].([]any)[0].(map[string]any)
		if ch["text"] != want || ch["finish_reason"] != "stop" {
			t.Errorf("%s: %q (%v), want %q", trigger, ch["text"], ch["finish_reason"], want)
		}
	}
}
