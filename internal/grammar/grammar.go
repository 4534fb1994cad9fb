// Package grammar is grammar-constrained decoding: it compiles a JSON
// Schema (or "any JSON object", or a tool call in a model's call syntax)
// into a byte-level automaton and, over a model's vocabulary, tells which
// tokens may come next (a bitmask) and advances by the sampled token.
//
// The automaton is a DFA: schemas are compiled (Thompson NFA, subset
// construction, trimming of states that cannot finish, minimization by
// partition refinement) into states whose next-token sets depend on the
// state alone. So the token mask of a state is computed once, by one walk of
// the vocabulary sorted by bytes (shared prefixes walked once, a dead
// prefix skipping every token under it: xgrammar's token trie), where
// a string's plain content tokens come from a per-vocabulary mask
// instead (split.go), and cached; decoding then copies a cached mask per
// token. The price of
// having no stack is bounded nesting for untyped values and recursive
// $refs (Options), which docs/constrained-decoding.md discusses.
package grammar

import (
	"errors"
	"fmt"
)

// Options bound the automaton. Zero fields take the defaults.
type Options struct {
	// MaxDepth is how deep objects and arrays may nest, counting from the
	// top value, where the schema leaves values untyped ({}, true,
	// json_object); default 4: json_object is any object with containers
	// nested at most 4 deep, the top one included. The automaton has no
	// stack, so any-JSON is any JSON up to this depth.
	MaxDepth int
	// MaxRefDepth is how many times a recursive $ref is unrolled; deeper
	// alternatives are cut off (default 3).
	MaxRefDepth int
	// MaxNFAStates and MaxDFAStates refuse schemas whose automaton would
	// be too large (defaults 300000 and 60000).
	MaxNFAStates, MaxDFAStates int
	// Think, when set, lets a reasoning model think before the value.
	Think *Thinking
	// Specials maps call markup to the special token the model has for
	// it (Mistral's [TOOL_CALLS], gpt-oss's <|channel|>): a forced call
	// writes that token (SpecialLiteral), not the text. The token must be
	// among NewVocab's specials.
	Specials map[string]int32
}

// Thinking is a reasoning model's thought markup (Qwen 3's
// <think>...</think>): before the value comes free text up to the close
// marker, then at most two newlines. With Opened the prompt already
// opened the thought, so the answer starts inside it; otherwise the
// thought is optional and starts with Open. The thought itself is not
// constrained (a model may think until max_tokens).
type Thinking struct {
	Open, Close string
	Opened      bool
}

const defaultNFAStates, defaultDFAStates = 300000, 60000

func (o Options) withDefaults() Options {
	if o.MaxDepth <= 0 {
		o.MaxDepth = 4
	}
	if o.MaxRefDepth <= 0 {
		o.MaxRefDepth = 3
	}
	if o.MaxNFAStates <= 0 {
		o.MaxNFAStates = defaultNFAStates
	}
	if o.MaxDFAStates <= 0 {
		o.MaxDFAStates = defaultDFAStates
	}
	return o
}

// Grammar is a compiled constraint over bytes. It is immutable and safe
// for concurrent use.
type Grammar struct {
	d *dfa
}

// Accepts reports whether b is a complete value of the grammar.
func (g *Grammar) Accepts(b []byte) bool {
	s := g.walk(g.d.start, b)
	return s >= 0 && g.d.accept[s]
}

func (g *Grammar) walk(s int32, b []byte) int32 {
	for _, c := range b {
		if s = g.d.next(s, c); s < 0 {
			return -1
		}
	}
	return s
}

// CompileSchema compiles a JSON Schema (draft 2020-12 keywords; see
// docs/constrained-decoding.md for the supported set). A schema the
// automaton cannot enforce gives a *SchemaError or another error saying
// why.
func CompileSchema(schema []byte, o Options) (*Grammar, error) {
	return compileWrapped(schema, "", "", o)
}

// JSONObject is any JSON object (response_format json_object), nested at
// most Options.MaxDepth levels.
func JSONObject(o Options) (*Grammar, error) {
	return compileWrapped([]byte(`{"type":"object","additionalProperties":true}`), "", "", o)
}

// piece is one alternative of a grammar: prefix, a schema's value, suffix.
type piece struct {
	prefix string
	schema []byte
	suffix string
}

// compileWrapped compiles prefix, the schema's value, then suffix.
func compileWrapped(schema []byte, prefix, suffix string, o Options) (*Grammar, error) {
	return compilePieces([]piece{{prefix, schema, suffix}}, o)
}

// compilePieces compiles the alternatives; each schema is its own
// document for $ref.
func compilePieces(ps []piece, o Options) (*Grammar, error) {
	o = o.withDefaults()
	n := newNFA(o.MaxNFAStates)
	alts := make([]frag, len(ps))
	for i, p := range ps {
		root, err := parseJSON(p.schema)
		if err != nil {
			return nil, &SchemaError{Msg: fmt.Sprintf("the schema is not valid JSON: %v", err)}
		}
		c := &compiler{n: n, root: root, opts: o, refs: map[string]int{}}
		alts[i] = n.seq(n.lit(p.prefix), c.schema(root, "", o.MaxDepth), n.lit(p.suffix))
		if c.err != nil {
			return nil, c.err
		}
	}
	return finish(n, alts, o)
}

// finish compiles the alternatives' automaton (after the thought, when
// the model thinks first).
func finish(n *nfa, alts []frag, o Options) (*Grammar, error) {
	f := alts[0]
	if len(alts) > 1 {
		f = n.alt(alts...)
	}
	if t := o.Think; t != nil && t.Close != "" {
		f = n.seq(n.thought(t), f)
	}
	d, err := determinize(n, f, o.MaxDFAStates)
	if err != nil {
		return nil, schemaErr(err)
	}
	return &Grammar{d: d}, nil
}

// schemaErr is a compile error as the *SchemaError the callers report.
func schemaErr(err error) error {
	if errors.Is(err, errEmpty) {
		return &SchemaError{Msg: err.Error() + " (unsatisfiable, or recursion deeper than the unrolling limit)"}
	}
	return &SchemaError{Msg: err.Error()}
}

// thoughtDFA is the thought before the value, nil when the model does
// not think first.
func thoughtDFA(o Options) (*dfa, error) {
	t := o.Think
	if t == nil || t.Close == "" {
		return nil, nil
	}
	n := newNFA(o.MaxNFAStates)
	d, err := determinize(n, n.thought(t), o.MaxDFAStates)
	if err != nil {
		return nil, schemaErr(err)
	}
	return d, nil
}
