package server

import (
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlxcel/mlxcel/internal/app"
	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/grammar"
)

func testGrammars(t *testing.T) *grammars {
	l := loadModel(t, "")
	gs := newGrammars()
	gs.vocab = grammar.NewVocab(l.Tokenizer, l.Tokenizer.VocabSize())
	return gs
}

func constCompile(key string) func() (*grammar.Grammar, error) {
	return func() (*grammar.Grammar, error) {
		return grammar.CompileSchema([]byte(`{"const":`+key+`}`), grammar.Options{})
	}
}

// TestGrammarCacheBound: the per-model cache keeps at most
// maxCachedGrammars tables, the newest always among them, and drops the
// least recently used: a table looked up all along stays.
func TestGrammarCacheBound(t *testing.T) {
	gs := testGrammars(t)
	hot, err := gs.tableFor("hot", constCompile("0"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 * maxCachedGrammars {
		key := strconv.Itoa(i + 1)
		if _, err := gs.tableFor(key, constCompile(key)); err != nil {
			t.Fatal(err)
		}
		if _, ok := gs.table[key]; !ok || len(gs.table) > maxCachedGrammars {
			t.Fatalf("after %d: %d tables, newest kept %v", i, len(gs.table), ok)
		}
		if again, _ := gs.tableFor("hot", nil); again != hot {
			t.Fatalf("after %d: the table used at every step was dropped", i)
		}
	}
	if _, ok := gs.table["1"]; ok {
		t.Fatal("the least recently used table was kept")
	}
}

// TestGrammarCacheCompilesOnce: requests arriving while a source
// compiles wait for that compile; a failed compile is not kept.
func TestGrammarCacheCompilesOnce(t *testing.T) {
	gs := testGrammars(t)
	var compiles atomic.Int32
	slow := func() (*grammar.Grammar, error) {
		compiles.Add(1)
		time.Sleep(50 * time.Millisecond)
		return constCompile("1")()
	}
	var wg sync.WaitGroup
	tables := make([]*grammar.TokenTable, 8)
	for i := range tables {
		wg.Go(func() {
			tt, err := gs.tableFor("k", slow)
			if err != nil {
				t.Error(err)
			}
			tables[i] = tt
		})
	}
	wg.Wait()
	if compiles.Load() != 1 {
		t.Fatalf("%d compiles for one source", compiles.Load())
	}
	for _, tt := range tables {
		if tt == nil || tt != tables[0] {
			t.Fatal("the waiting requests got different tables")
		}
	}
	bad := func() (*grammar.Grammar, error) {
		return grammar.CompileSchema([]byte(`{"type":"nope"}`), grammar.Options{})
	}
	for range 2 {
		if _, err := gs.tableFor("bad", bad); err == nil {
			t.Fatal("a bad schema compiled")
		}
	}
	if _, ok := gs.table["bad"]; ok {
		t.Fatal("a failed compile was kept")
	}
}

// constraintServer is a served stories260k whose forced calls are in the
// hermes syntax.
func constraintServer(t *testing.T) (*served, *app.Loaded) {
	l := loadModel(t, "")
	s := startServer(t, l, Options{Agent: AgentOptions{ToolCallParser: "hermes"}})
	return s.model(), l
}

// takes reports whether c lets the model write text and then end.
func takes(t *testing.T, m *served, l *app.Loaded, c engine.Constraint, text string) bool {
	t.Helper()
	ids, err := l.Tokenizer.Encode(text, false)
	if err != nil {
		t.Fatal(err)
	}
	ids = ids[1:] // the SentencePiece normalizer's leading "▁"
	mask := make([]uint64, (m.vocab+63)/64)
	for _, id := range append(ids, m.stopIDs[0]) {
		if c.Mask(mask) != nil || mask[id/64]&(1<<(id%64)) == 0 {
			return false
		}
		if err := c.Accept(id); err != nil {
			t.Fatal(err)
		}
	}
	return true
}

// TestGrammarCacheKeys: schemas and tool sets that differ in anything
// the grammar enforces get their own grammar, never a cached one of
// another source: an enum's values, the order of properties (written in
// the schema's order), a tool's parameters or name, the number of calls,
// a thought first; a schema differing only in whitespace reuses the
// cached one.
func TestGrammarCacheKeys(t *testing.T) {
	m, l := constraintServer(t)
	format := func(schema string) json.RawMessage {
		return json.RawMessage(`{"type":"json_schema","json_schema":{"name":"x","schema":` + schema + `}}`)
	}
	check := func(name string, rf json.RawMessage, o grammar.Options, text string, want bool) engine.Constraint {
		t.Helper()
		c, e := m.responseFormatConstraint(rf, o)
		if e != nil {
			t.Fatal(e)
		}
		if got := takes(t, m, l, c, text); got != want {
			t.Errorf("%s: %q taken %v, want %v", name, text, got, want)
		}
		return c
	}
	ab := `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}`
	ba := `{"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"integer"}},"required":["a","b"]}`
	check("a then b", format(ab), grammar.Options{}, `{"a": 1, "b": 2}`, true)
	check("b then a", format(ba), grammar.Options{}, `{"a": 1, "b": 2}`, false)
	check("b then a", format(ba), grammar.Options{}, `{"b": 2, "a": 1}`, true)
	spaced := `{ "type": "object",
		"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"] }`
	gs := m.grammars()
	cached := len(gs.table)
	check("a then b, spaced", format(spaced), grammar.Options{}, `{"a": 1, "b": 2}`, true)
	if len(gs.table) != cached {
		t.Error("a schema differing only in whitespace was compiled again")
	}
	enum := func(vals string) json.RawMessage {
		return format(`{"type":"object","properties":{"e":{"enum":` + vals + `}},"required":["e"]}`)
	}
	check("enum xy", enum(`["x","y"]`), grammar.Options{}, `{"e": "x"}`, true)
	check("enum yz", enum(`["y","z"]`), grammar.Options{}, `{"e": "x"}`, false)
	think := grammar.Options{Think: &grammar.Thinking{Open: "<think>", Close: "</think>", Opened: true}}
	check("a then b, opened thought", format(ab), think, `{"a": 1, "b": 2}`, false)
	check("a then b, opened thought", format(ab), think, "</think>{\"a\": 1, \"b\": 2}", true)

	call := func(name string, tools []grammar.Tool, calls int, text string, want bool) {
		t.Helper()
		c, e := m.forcedToolCall("hermes", tools, calls, grammar.Options{})
		if e != nil {
			t.Fatal(e)
		}
		if got := takes(t, m, l, c, text); got != want {
			t.Errorf("%s: %q taken %v, want %v", name, text, got, want)
		}
	}
	city := []grammar.Tool{{Name: "f", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string","maxLength":5}},"required":["city"]}`)}}
	zip := []grammar.Tool{{Name: "f", Parameters: []byte(`{"type":"object","properties":{"zip":{"type":"integer"}},"required":["zip"]}`)}}
	g := []grammar.Tool{{Name: "g", Parameters: city[0].Parameters}}
	one := "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"
	call("f(city)", city, 1, one, true)
	call("f(zip)", zip, 1, one, false)
	call("g(city)", g, 1, one, false)
	call("f(city) twice, one allowed", city, 1, one+"\n"+one, false)
	call("f(city) twice, four allowed", city, 4, one+"\n"+one, true)
	// Two tools, and one whose name spells the first's name, schema and
	// the second's name: one key under a plain separator.
	two := []grammar.Tool{city[0], {Name: "g", Parameters: []byte(`{}`)}}
	call("f(city) or g", two, 1, one, true)
	spelt := []grammar.Tool{{Name: "f|" + string(city[0].Parameters) + "|g", Parameters: []byte(`{}`)}}
	call("a name spelling f(city) and g", spelt, 1, one, false)
}
