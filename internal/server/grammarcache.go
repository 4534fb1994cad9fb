package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"sync"

	"github.com/mlxcel/mlxcel/internal/grammar"
	"github.com/mlxcel/mlxcel/internal/tokenizer"
)

// The compiled grammars kept per model: at most maxCachedGrammars, and
// their cached masks (a state's mask is vocab/8 bytes, 19 KB for Qwen 3)
// at most maxCachedMaskBytes; past either, the least recently used
// tables are dropped when the next one is added. Agent frameworks send
// the same tool list with every turn of a conversation, so a repeated
// tool set (or schema) costs a map lookup, not a compile.
const (
	maxCachedGrammars  = 64
	maxCachedMaskBytes = 256 << 20
)

// grammars caches, per tokenizer and vocabulary width, the vocabulary
// layout and the compiled token tables by their source, so a schema sent
// again reuses its cached masks. It lives beside the served model rather
// than in it.
type grammars struct {
	once  sync.Once
	vocab *grammar.Vocab
	// specials: the forced-call markup the tokenizer has as special
	// tokens, written as those tokens (grammar.Options.Specials).
	specials map[string]int32
	mu       sync.Mutex
	table    map[string]*cachedTable
	clock    uint64 // counts lookups: an entry's last use, for LRU
}

// cachedTable is one entry; ready is closed once t or err is set, so a
// request arriving while another compiles the same source waits for that
// compile instead of running its own.
type cachedTable struct {
	ready chan struct{}
	t     *grammar.TokenTable
	err   error
	used  uint64
}

var grammarCaches sync.Map // grammarKey -> *grammars

type grammarKey struct {
	tok   *tokenizer.Tokenizer
	vocab int
}

func newGrammars() *grammars { return &grammars{table: map[string]*cachedTable{}} }

func (m *served) grammars() *grammars {
	k := grammarKey{m.tok, m.vocab}
	g, _ := grammarCaches.LoadOrStore(k, newGrammars())
	gs := g.(*grammars)
	gs.once.Do(func() {
		gs.specials = map[string]int32{}
		var ids []int32
		for _, mk := range grammar.ToolMarkers(m.agent.toolParser) {
			if id, ok := m.tok.TokenID(mk); ok && m.tok.IsSpecial(id) {
				gs.specials[mk] = id
				ids = append(ids, id)
			}
		}
		gs.vocab = grammar.NewVocab(m.tok, m.vocab, ids...)
	})
	return gs
}

// tableFor returns the token table cached under key, compiling it with
// compile on a miss (once, however many requests ask meanwhile). The
// compile runs on the request's goroutine, before the request reaches
// the engine: the step loop of the other streams never waits for it. A
// failed compile is not kept.
func (gs *grammars) tableFor(key string, compile func() (*grammar.Grammar, error)) (*grammar.TokenTable, error) {
	gs.mu.Lock()
	gs.clock++
	if e, ok := gs.table[key]; ok {
		e.used = gs.clock
		gs.mu.Unlock()
		<-e.ready
		return e.t, e.err
	}
	e := &cachedTable{ready: make(chan struct{}), used: gs.clock}
	gs.evictLocked()
	gs.table[key] = e
	gs.mu.Unlock()
	// e.t and e.err are set under gs.mu (evictLocked reads them), before
	// ready is closed (the waiters read them after).
	var t *grammar.TokenTable
	err := errCompilePanicked
	defer func() {
		gs.mu.Lock()
		e.t, e.err = t, err
		if t == nil && gs.table[key] == e {
			delete(gs.table, key)
		}
		gs.mu.Unlock()
		close(e.ready)
	}()
	g, err := compile()
	if err != nil {
		return nil, err
	}
	t = grammar.NewTokenTable(g, gs.vocab)
	return t, nil
}

// errCompilePanicked is what the requests waiting on a compile that
// panicked get.
var errCompilePanicked = errors.New("the grammar compile failed")

// evictLocked drops the least recently used compiled tables until one
// more fits both bounds. Tables still compiling are never dropped (their
// waiters hold them anyway).
func (gs *grammars) evictLocked() {
	var held int64
	for _, e := range gs.table {
		if e.t != nil {
			held += e.t.MaskBytes()
		}
	}
	for len(gs.table) >= maxCachedGrammars || held > maxCachedMaskBytes {
		var oldest string
		var victim *cachedTable
		for k, e := range gs.table {
			if e.t != nil && (victim == nil || e.used < victim.used) {
				oldest, victim = k, e
			}
		}
		if victim == nil {
			return // all compiling
		}
		held -= victim.t.MaskBytes()
		delete(gs.table, oldest)
	}
}

// canonicalJSON is a schema's cache key: its JSON without insignificant
// whitespace. Key order is kept: properties are written in the schema's
// order, so schemas differing only in it compile to different grammars.
// Text that is not JSON stays as it is (its compile fails anyway).
func canonicalJSON(raw []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}
