package engine

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// newPrefixEngine is newEngine with the fake model checking every KV write
// against the block manager: a row stored into a block that is shared or
// prefix-cached fails the step (and so the test).
func newPrefixEngine(t *testing.T, m *fakeModel, cfg Config) *Engine {
	t.Helper()
	return newCheckedEngine(t, m, m, cfg)
}

// newCheckedEngine is newPrefixEngine for a model wrapping the fake f.
func newCheckedEngine(t *testing.T, m Model, f *fakeModel, cfg Config) *Engine {
	t.Helper()
	e := newEngine(t, m, cfg)
	f.mu.Lock()
	f.writable = e.sched.KV().Writable
	f.mu.Unlock()
	return e
}

// runSharedPrefix runs n sharedPrefixRequests on e one after another:
// each must give the reference tokens, and some prompt tokens must come
// from the cache.
func runSharedPrefix(t *testing.T, e *Engine, vocab, n int) {
	t.Helper()
	for _, r := range sharedPrefixRequests(n) {
		res := collect(t, submit(t, e, r))
		if want, _ := reference(vocab, r.Prompt, r.MaxTokens, nil); !slices.Equal(res.tokens, want) {
			t.Fatalf("got %v\nwant %v", res.tokens, want)
		}
	}
	if e.Stats().PrefixCacheHits == 0 {
		t.Fatal("no prefix-cache hits")
	}
}

// stopAndCheck stops e (so its goroutine no longer touches the block
// manager) and verifies the manager's bookkeeping.
func stopAndCheck(t *testing.T, e *Engine) {
	t.Helper()
	e.Stop()
	if err := e.sched.KV().CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if used := e.sched.KV().UsedBlocks(); used != 0 {
		t.Fatalf("%d blocks still held after every request ended", used)
	}
}

// sharedPrefixRequests: n requests over 3 prompt families (prefixes of 100,
// 150 and 230 tokens), each cut a little differently and given its own
// tail, so they share prefixes of many lengths, not all block aligned.
func sharedPrefixRequests(n int) []Request {
	fams := [][]int32{prompt(100, 50), prompt(150, 51), prompt(230, 52)}
	var reqs []Request
	for i := range n {
		f := fams[i%3]
		p := append(slices.Clone(f[:len(f)-(i%4)*7]), prompt(i%5*9, 60+i)...)
		reqs = append(reqs, Request{Prompt: p, MaxTokens: 10 + (i*37)%120})
	}
	return reqs
}

// Requests sharing long prefixes, run concurrently on a cache small enough
// to preempt, give exactly the reference outputs with prefix caching on and
// off (the fake model hashes each row's history back through the block
// table, so a wrong or stale mapped block changes the output), and with it
// on compute fewer prefill tokens.
func TestPrefixCacheConcurrentMatchesReference(t *testing.T) {
	reqs := sharedPrefixRequests(18)
	stats := map[bool]Stats{}
	for _, off := range []bool{false, true} {
		m := newFake()
		e := newPrefixEngine(t, m, Config{Parallel: 4, PrefillChunk: 48, BlockSize: 16, NumBlocks: 36, MaxQueue: 100, DisablePrefixCache: off})
		if e.PrefixCaching() == off {
			t.Fatalf("PrefixCaching() = %v with DisablePrefixCache %v", e.PrefixCaching(), off)
		}
		e.Start()
		runConcurrent(t, e, m.vocab, reqs)
		stats[off] = e.Stats()
		stopAndCheck(t, e)
	}
	on, off := stats[false], stats[true]
	t.Logf("prefill tokens on %d off %d; hits %d of %d; preemptions on %d off %d",
		on.PrefillTokens, off.PrefillTokens, on.PrefixCacheHits, on.PrefixCacheQueries, on.Preemptions, off.Preemptions)
	if on.Preemptions == 0 {
		t.Error("the small cache should have forced preemptions")
	}
	if on.PrefixCacheHits == 0 || on.PrefillTokens >= off.PrefillTokens {
		t.Errorf("prefix caching saved nothing: prefill %d vs %d, %d hit tokens", on.PrefillTokens, off.PrefillTokens, on.PrefixCacheHits)
	}
	if off.PrefixCacheHits != 0 || off.PrefixCacheQueries != 0 {
		t.Errorf("disabled cache reports %d/%d", off.PrefixCacheHits, off.PrefixCacheQueries)
	}
}

// The same requests one after another: every request after the first of
// its family maps the family's prefix.
func TestPrefixCacheSequentialMatchesReference(t *testing.T) {
	m := newFake()
	e := newPrefixEngine(t, m, Config{Parallel: 2, PrefillChunk: 64, BlockSize: 16, NumBlocks: 64})
	e.Start()
	for i, r := range sharedPrefixRequests(9) {
		res := collect(t, submit(t, e, r))
		want, _ := reference(m.vocab, r.Prompt, r.MaxTokens, nil)
		if !slices.Equal(res.tokens, want) {
			t.Fatalf("request %d: got %v\nwant %v", i, res.tokens, want)
		}
		if cached := res.last.Timing.CachedTokens; i >= 3 && cached < 64 {
			t.Errorf("request %d: %d prompt tokens cached, want its family's prefix", i, cached)
		}
	}
	stopAndCheck(t, e)
}

// The second request with a shared 100-token prefix computes only what
// follows the 96 tokens in full blocks; a follow-up turn that repeats the
// first request's prompt and answer maps the answer's blocks too.
func TestPrefixCacheSecondRequestSkipsPrefix(t *testing.T) {
	m := newFake()
	e := newPrefixEngine(t, m, Config{Parallel: 2, BlockSize: 16})
	e.Start()
	pre := prompt(100, 7)
	a := append(slices.Clone(pre), 1, 2, 3, 4, 5, 6, 7) // 107 tokens
	ra := collect(t, submit(t, e, Request{Prompt: a, MaxTokens: 30}))
	st := e.Stats()
	if st.PrefillTokens != 107 || ra.last.Timing.CachedTokens != 0 {
		t.Fatalf("first request: prefill %d, cached %d", st.PrefillTokens, ra.last.Timing.CachedTokens)
	}

	b := append(slices.Clone(pre), 9, 9, 9, 9, 9) // 105 tokens
	rb := collect(t, submit(t, e, Request{Prompt: b, MaxTokens: 20}))
	if want, _ := reference(m.vocab, b, 20, nil); !slices.Equal(rb.tokens, want) {
		t.Fatalf("b: got %v\nwant %v", rb.tokens, want)
	}
	st2 := e.Stats()
	if got := st2.PrefillTokens - st.PrefillTokens; got != 105-96 {
		t.Fatalf("second request prefilled %d tokens, want %d", got, 105-96)
	}
	if rb.last.Timing.CachedTokens != 96 || st2.PrefixCacheHits != 96 || st2.PrefixCacheQueries != 107+105 {
		t.Fatalf("cached %d, stats hits %d queries %d", rb.last.Timing.CachedTokens, st2.PrefixCacheHits, st2.PrefixCacheQueries)
	}

	// Next turn: a's prompt, its answer and 3 new tokens. a's KV was
	// computed for 107+30-1 = 136 tokens: 8 full blocks (128 tokens).
	c := append(append(slices.Clone(a), ra.tokens...), 11, 12, 13)
	rc := collect(t, submit(t, e, Request{Prompt: c, MaxTokens: 10}))
	if want, _ := reference(m.vocab, c, 10, nil); !slices.Equal(rc.tokens, want) {
		t.Fatalf("c: got %v\nwant %v", rc.tokens, want)
	}
	if rc.last.Timing.CachedTokens != 128 {
		t.Fatalf("follow-up turn: %d tokens cached, want 128", rc.last.Timing.CachedTokens)
	}
	if e.Stats().KVBlocksCached == 0 {
		t.Fatal("no idle cached blocks reported after the requests ended")
	}
	stopAndCheck(t, e)
}

// A burst of requests with one 200-token prefix, submitted together: the
// first computes the prefix, the others wait a step for it instead of
// computing copies, then each computes only its own tail.
func TestPrefixCacheBurst(t *testing.T) {
	m := newFake()
	e := newPrefixEngine(t, m, Config{Parallel: 8, PrefillChunk: 512, BlockSize: 16})
	pre := prompt(200, 3)
	var reqs []Request
	for i := range 8 {
		reqs = append(reqs, Request{Prompt: append(slices.Clone(pre), prompt(10, 20+i)...), MaxTokens: 12})
	}
	// Submitted before Start, so the first step sees them all.
	streams := make([]*Stream, len(reqs))
	for i, r := range reqs {
		streams[i] = submit(t, e, r)
	}
	e.Start()
	for i, s := range streams {
		res := collect(t, s)
		if want, _ := reference(m.vocab, reqs[i].Prompt, 12, nil); !slices.Equal(res.tokens, want) {
			t.Fatalf("request %d: got %v\nwant %v", i, res.tokens, want)
		}
	}
	st := e.Stats()
	// 210 for the first, 210-192 = 18 for each of the other 7.
	if st.PrefillTokens != 210+7*18 || st.PrefixCacheHits != 7*192 {
		t.Fatalf("prefill %d (want %d), hits %d", st.PrefillTokens, 210+7*18, st.PrefixCacheHits)
	}
	stopAndCheck(t, e)
}

// Cancelling a request that shares blocks with a running one drops only
// its own references: the other keeps its KV and its output.
func TestPrefixCacheCancelKeepsSharedBlocks(t *testing.T) {
	m := newFake()
	m.delay = 200 * time.Microsecond
	e := newPrefixEngine(t, m, Config{Parallel: 4, BlockSize: 16})
	e.Start()
	pre := prompt(160, 4)
	a := append(slices.Clone(pre), 1, 2)
	sa := submit(t, e, Request{Prompt: a, MaxTokens: 300})
	<-sa.Events() // a has computed its prompt
	ctx, cancel := context.WithCancel(context.Background())
	sb, err := e.Submit(ctx, Request{Prompt: append(slices.Clone(pre), 3), MaxTokens: 1000})
	if err != nil {
		t.Fatal(err)
	}
	<-sb.Events()
	waitFor(t, "b running on a's blocks", func() bool { return e.Stats().PrefixCacheHits == 160 })
	cancel()
	waitFor(t, "b cancelled", func() bool { return e.Stats().Cancelled == 1 })
	res := collect(t, sa)
	want, _ := reference(m.vocab, a, 300, nil)
	if got := append([]int32{want[0]}, res.tokens...); !slices.Equal(got, want) {
		t.Fatalf("a after b's cancel: got %v\nwant %v", got, want)
	}
	stopAndCheck(t, e)
}

// With sliding-window layers in per-slot rings on a backend that keeps no
// snapshots of them (the fake), prefix caching is off: a sequence mapping
// cached blocks would find no window of keys in its ring.
// Kept paged (rings not smaller than the pages), the windowed layer caches
// like any other.
func TestPrefixCacheOffWithRings(t *testing.T) {
	m := newFake()
	m.window = 8
	e := newPrefixEngine(t, m, Config{Parallel: 2, PrefillChunk: 16, BlockSize: 16, NumBlocks: 100})
	if e.KVStore().Spec().RingTokens == 0 || e.PrefixCaching() {
		t.Fatalf("rings %d, prefix caching %v: want rings and no prefix caching", e.KVStore().Spec().RingTokens, e.PrefixCaching())
	}
	if why := e.PrefixCacheOff(); !strings.Contains(why, "fake backend keeps no snapshots") {
		t.Errorf("reason %q", why)
	}
	e.Start()
	runConcurrent(t, e, m.vocab, sharedPrefixRequests(4))
	if st := e.Stats(); st.PrefixCacheHits != 0 || st.PrefixCacheQueries != 0 {
		t.Fatalf("stats %+v", st)
	}

	paged := newFake()
	paged.window = 8
	e2 := newPrefixEngine(t, paged, Config{Parallel: 4, PrefillChunk: 512, BlockSize: 16, NumBlocks: 30})
	if e2.KVStore().Spec().RingTokens != 0 || !e2.PrefixCaching() {
		t.Fatal("paged windowed layers should keep prefix caching")
	}
	e2.Start()
	runSharedPrefix(t, e2, paged.vocab, 6)
	stopAndCheck(t, e2)
}

// A backend that keeps no rings (the CUDA backend) pages windowed layers
// whatever the cache's size, so they cache like any other layer.
func TestPrefixCacheOnWithoutRingBackend(t *testing.T) {
	m := newFake()
	m.window = 8
	e := newCheckedEngine(t, pagedModel{m}, m, Config{Parallel: 2, PrefillChunk: 16, BlockSize: 16, NumBlocks: 100})
	if e.KVStore().Spec().RingTokens != 0 || !e.PrefixCaching() || e.PrefixCacheOff() != "" {
		t.Fatalf("rings %d, prefix caching %v (%q): want no rings and prefix caching", e.KVStore().Spec().RingTokens, e.PrefixCaching(), e.PrefixCacheOff())
	}
	e.Start()
	runSharedPrefix(t, e, m.vocab, 4)
	stopAndCheck(t, e)
}

// pagedModel is the fake model on a backend without rings.
type pagedModel struct{ *fakeModel }

func (pagedModel) Backend() backend.Backend { return pagedBackend{} }
