package grammar

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/toolcall"
)

// The forced-call tools: strings bounded, patterned and unbounded,
// enums, integers, nested objects, arrays, anyOf, and a tool without
// parameters.
var forcedTools = []Tool{
	{Name: "get_weather", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string","maxLength":10},"unit":{"type":"string","enum":["c","f"]},"days":{"type":"integer","minimum":1,"maximum":14}},"required":["city","unit"]}`)},
	{Name: "search", Parameters: []byte(`{"type":"object","properties":{"query":{"type":"string","pattern":"^[a-z <]{1,12}$"},"filters":{"type":"object","properties":{"lang":{"enum":["en","fr"]},"max":{"type":"integer","minimum":0,"maximum":9}},"required":["lang"]},"tags":{"type":"array","items":{"type":"string","maxLength":5},"maxItems":3},"exact":{"type":"boolean"},"note":{"anyOf":[{"type":"null"},{"type":"string","maxLength":4}]},"text":{"type":"string"}},"required":["query","filters"]}`)},
	{Name: "noop"},
	// A boolean-schema property beside a string one (the qwen3_coder
	// parser must still read the string as one).
	{Name: "misc", Parameters: []byte(`{"type":"object","properties":{"v":true,"s":{"type":"string","maxLength":3}},"required":["v","s"]}`)},
}

// withSpecials maps every marker of syntax to a token id, as a tokenizer
// that has them as special tokens would.
func withSpecials(syntax string) map[string]int32 {
	sp := map[string]int32{}
	for i, m := range ToolMarkers(syntax) {
		sp[m] = int32(1000 + i)
	}
	return sp
}

// unspecial writes each special's literal as the text the detokenizer
// gives for it.
func unspecial(b []byte, sp map[string]int32) string {
	s := string(b)
	for m, id := range sp {
		s = strings.ReplaceAll(s, SpecialLiteral(id), m)
	}
	return s
}

// parseCalls reads text with the syntax's parser and checks it is only
// calls of forced tools whose arguments validate.
func parseCalls(t *testing.T, syntax, text string, tools []Tool) []toolcall.Call {
	t.Helper()
	st, err := toolcall.NewStream(syntax)
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]json.RawMessage{}
	params := map[string]string{}
	for _, tl := range tools {
		schemas[tl.Name] = tl.Parameters
		params[tl.Name] = string(tl.Parameters)
		if params[tl.Name] == "" {
			params[tl.Name] = `{"type":"object"}`
		}
	}
	st.Schemas(schemas)
	content, calls := toolcall.Collect(append(st.Push(text), st.Close()...))
	if len(calls) == 0 || strings.TrimSpace(content) != "" {
		t.Fatalf("%s: %q parsed as content %q and calls %v", syntax, text, content, calls)
	}
	for _, c := range calls {
		p, ok := params[c.Name]
		if !ok {
			t.Fatalf("%s: %q called %q", syntax, text, c.Name)
		}
		if err := valid(validator(t, p), []byte(c.Arguments)); err != nil {
			t.Fatalf("%s: %q: arguments %s do not validate: %v", syntax, text, c.Arguments, err)
		}
	}
	return calls
}

// parseOne is parseCalls of exactly one call.
func parseOne(t *testing.T, syntax, text string, tools []Tool) toolcall.Call {
	t.Helper()
	calls := parseCalls(t, syntax, text, tools)
	if len(calls) != 1 {
		t.Fatalf("%s: %q parsed as %d calls, want 1", syntax, text, len(calls))
	}
	return calls[0]
}

// TestToolCallSyntaxesParse: random walks of every syntax's forced-call
// automaton, markup as text or as special tokens, parse through that
// syntax's parser as calls of offered tools with valid arguments: one
// when one is allowed, 1 to 3 (several seen) when 3 are, except in
// harmony, which holds one call per answer.
func TestToolCallSyntaxesParse(t *testing.T) {
	for _, syntax := range ToolSyntaxes() {
		for _, special := range []bool{false, true} {
			for _, maxCalls := range []int{1, 3} {
				var sp map[string]int32
				if special {
					sp = withSpecials(syntax)
				}
				g, err := ToolCalls(syntax, forcedTools, maxCalls, Options{Specials: sp})
				if err != nil {
					t.Fatalf("%s: %v", syntax, err)
				}
				if syntax == "harmony" {
					maxCalls = 1
				}
				r := rand.New(rand.NewPCG(7, uint64(len(syntax))))
				dist := g.distances()
				seen := map[string]bool{}
				counts := map[int]int{}
				for i := range 300 {
					text := unspecial(g.sample(r, dist, 5+i%120), sp)
					calls := parseCalls(t, syntax, text, forcedTools)
					if len(calls) > maxCalls {
						t.Fatalf("%s: %q parsed as %d calls, at most %d allowed", syntax, text, len(calls), maxCalls)
					}
					counts[len(calls)]++
					for _, c := range calls {
						seen[c.Name] = true
					}
					if i == 61 && !special {
						t.Logf("%s: %q", syntax, text)
					}
				}
				if len(seen) != len(forcedTools) {
					t.Errorf("%s: only %v called", syntax, seen)
				}
				if maxCalls > 1 && counts[1] == 300 {
					t.Errorf("%s (specials %v): never more than one call", syntax, special)
				}
			}
		}
	}
}

// TestToolCallSyntaxesText: canonical calls of each syntax are accepted
// (and parse), and values spelling the markup a parser ends them at are
// refused.
func TestToolCallSyntaxesText(t *testing.T) {
	for _, c := range []struct {
		syntax, text string
		want         bool
	}{
		{"qwen3_coder", "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=unit>\nc\n</parameter>\n</function>\n</tool_call>", true},
		{"qwen3_coder", "<tool_call>\n<function=search>\n<parameter=query>\na <b\n</parameter>\n<parameter=filters>\n{\"lang\": \"en\"}\n</parameter>\n<parameter=note>\n\"hi\"\n</parameter>\n</function>\n</tool_call>", true},
		{"qwen3_coder", "<tool_call>\n<function=search>\n<parameter=query>\na\n</parameter>\n<parameter=filters>\n{\"lang\": \"en\"}\n</parameter>\n<parameter=text>\nx</parameter>y\n</parameter>\n</function>\n</tool_call>", false},
		{"qwen3_coder", "<tool_call>\n<function=get_weather>\n<parameter=city>\n\"Paris\"\n</parameter>\n<parameter=unit>\nc\n</parameter>\n</function>\n</tool_call>", true},
		{"qwen3_coder", "<tool_call>\n<function=get_weather>\n<parameter=unit>\nc\n</parameter>\n</function>\n</tool_call>", false},
		{"gemma4", `<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,unit:<|"|>c<|"|>,days:3}<tool_call|>`, true},
		{"gemma4", `<|tool_call>call:search{query:<|"|>a b<|"|>,filters:{lang:<|"|>fr<|"|>,max:2},tags:[<|"|>x<|"|>,<|"|><|"|>],exact:false,note:null}<tool_call|>`, true},
		{"gemma4", `<|tool_call>call:search{query:<|"|>a<|"|>,filters:{lang:<|"|>fr<|"|>},text:<|"|>a<|"|>b<|"|>}<tool_call|>`, false},
		{"gemma4", `<|tool_call>call:get_weather{city:"Paris",unit:"c"}<tool_call|>`, false},
		{"gemma4", `<|tool_call>call:noop{}<tool_call|>`, true},
		{"harmony", `<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris", "unit": "f"}<|call|>`, true},
		{"harmony", `<|channel|>commentary to=functions.search <|constrain|>json<|message|>{"query": "a", "filters": {"lang": "en"}, "text": "x<|call|>"}<|call|>`, false},
		{"mistral", `[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}]`, true},
		{"mistral", `[TOOL_CALLS] [{"name": "other", "arguments": {}}]`, false},
	} {
		g, err := ToolCalls(c.syntax, forcedTools, 1, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := g.Accepts([]byte(c.text)); got != c.want {
			t.Errorf("%s: Accepts(%q) = %v, want %v", c.syntax, c.text, got, c.want)
		}
		if c.want {
			parseOne(t, c.syntax, c.text, forcedTools)
		}
	}
	// Mistral v11 (the tokenizer has [ARGS]): name[ARGS]{...}.
	sp := withSpecials("mistral")
	g, err := ToolCalls("mistral", forcedTools, 1, Options{Specials: sp})
	if err != nil {
		t.Fatal(err)
	}
	text := SpecialLiteral(sp["[TOOL_CALLS]"]) + "get_weather" + SpecialLiteral(sp["[ARGS]"]) + `{"city": "Oslo", "unit": "c"}`
	if !g.Accepts([]byte(text)) || g.Accepts([]byte(`[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo", "unit": "c"}`)) {
		t.Fatal("the v11 call is not written with the special tokens")
	}
	parseOne(t, "mistral", unspecial([]byte(text), sp), forcedTools)
}

// TestToolCallSpecialTokens: over a vocabulary where the markup is
// special tokens, the matcher allows the special token where the markup
// goes and no plain token spelling it; a stop token that is markup
// (gpt-oss's <|call|>) is walked, and then ends the answer.
func TestToolCallSpecialTokens(t *testing.T) {
	// id 0 EOS, 1-4 the harmony markup (special), then plain tokens.
	vocab := fakeSpecials{
		toks:    []string{"</s>", "<|channel|>", "<|constrain|>", "<|message|>", "<|call|>", "<", "|", "channel", "commentary", " to", "=functions", ".", "noop", " ", "json", "{", "}", "<|channel|>"},
		special: map[int32]bool{0: true, 1: true, 2: true, 3: true, 4: true},
	}
	sp := map[string]int32{"<|channel|>": 1, "<|constrain|>": 2, "<|message|>": 3, "<|call|>": 4}
	g, err := ToolCalls("harmony", []Tool{{Name: "noop"}}, 1, Options{Specials: sp})
	if err != nil {
		t.Fatal(err)
	}
	v := NewVocab(vocab, len(vocab.toks), 1, 2, 3, 4)
	m := NewTokenTable(g, v).NewMatcher([]int32{0, 4})
	mask := make([]uint64, v.Words())
	if err := m.Mask(mask); err != nil || !hasBit(mask, 1) || hasBit(mask, 5) || hasBit(mask, 17) || popcount(mask) != 1 {
		t.Fatalf("at the start the mask is %b (%v), want only the <|channel|> token", mask[0], err)
	}
	for _, id := range []int32{1, 8, 9, 10, 11, 12, 13, 2, 14, 3, 15, 16} {
		if err := m.Mask(mask); err != nil || !hasBit(mask, id) {
			t.Fatalf("token %d refused (%v)", id, err)
		}
		if err := m.Accept(id); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Mask(mask); err != nil || !hasBit(mask, 4) || hasBit(mask, 0) {
		t.Fatalf("after the arguments the mask is %b (%v), want <|call|> and not EOS", mask[0], err)
	}
	if err := m.Accept(4); err != nil || !m.Complete() {
		t.Fatalf("<|call|>: %v, complete %v", err, m.Complete())
	}
}

type fakeSpecials struct {
	toks    []string
	special map[int32]bool
}

func (f fakeSpecials) VocabSize() int             { return len(f.toks) }
func (f fakeSpecials) TokenBytes(id int32) []byte { return []byte(f.toks[id]) }
func (f fakeSpecials) IsSpecial(id int32) bool    { return f.special[id] }
