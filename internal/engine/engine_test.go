package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/sample"
)

func newEngine(t *testing.T, m Model, cfg Config) *Engine {
	t.Helper()
	e, err := New(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}

type result struct {
	tokens []int32
	events []Event
	last   Event
}

// collect reads a stream to its end.
func collect(t *testing.T, s *Stream) result {
	t.Helper()
	var r result
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-s.Events():
			if !ok {
				return r
			}
			if ev.Done {
				r.last = ev
				continue
			}
			r.tokens = append(r.tokens, ev.Token)
			r.events = append(r.events, ev)
		case <-timeout:
			t.Fatal("stream did not end")
		}
	}
}

func submit(t *testing.T, e *Engine, r Request) *Stream {
	t.Helper()
	s, err := e.Submit(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSingleRequestMatchesReference(t *testing.T) {
	m := newFake()
	e := newEngine(t, m, Config{})
	e.Start()
	p := prompt(40, 1)
	res := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: 30}))
	want, _ := reference(m.vocab, p, 30, nil)
	if !slices.Equal(res.tokens, want) {
		t.Fatalf("got %v\nwant %v", res.tokens, want)
	}
	if res.last.FinishReason != FinishLength || res.last.Err != nil || res.last.Token != -1 {
		t.Fatalf("terminal %+v", res.last)
	}
	tm := res.last.Timing
	if tm.PromptTokens != 40 || tm.GeneratedTokens != 30 || tm.TTFT <= 0 || tm.Total < tm.TTFT {
		t.Fatalf("timing %+v", tm)
	}
	for _, ev := range res.events {
		if ev.Logprob > 0 || ev.Logprob < -0.01 {
			t.Fatalf("logprob of a clear argmax should be ~0, got %v", ev.Logprob)
		}
	}
}

// runConcurrent submits all requests at once and checks every output
// against what it gives alone.
func runConcurrent(t *testing.T, e *Engine, vocab int, reqs []Request) []result {
	t.Helper()
	streams := make([]*Stream, len(reqs))
	for i, r := range reqs {
		streams[i] = submit(t, e, r)
	}
	results := make([]result, len(reqs))
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() { results[i] = collect(t, streams[i]) })
	}
	wg.Wait()
	for i, r := range reqs {
		want, stopped := reference(vocab, r.Prompt, r.MaxTokens, r.StopIDs)
		if !slices.Equal(results[i].tokens, want) {
			t.Fatalf("request %d (prompt %d): got %v\nwant %v", i, len(r.Prompt), results[i].tokens, want)
		}
		reason := FinishLength
		if stopped {
			reason = FinishStop
		}
		if results[i].last.FinishReason != reason {
			t.Fatalf("request %d: finish %q want %q", i, results[i].last.FinishReason, reason)
		}
	}
	return results
}

func mixedRequests(n int) []Request {
	var reqs []Request
	for i := range n {
		reqs = append(reqs, Request{
			Prompt:    prompt(1+(i*37)%300, i),
			MaxTokens: 5 + (i*13)%60,
		})
	}
	return reqs
}

func TestContinuousBatchingMatchesAlone(t *testing.T) {
	m := newFake()
	var mu sync.Mutex
	maxSeqs, mixed := 0, 0
	e := newEngine(t, m, Config{
		Parallel: 6, PrefillChunk: 64, MaxQueue: 100,
		OnStep: func(s StepStats) {
			mu.Lock()
			defer mu.Unlock()
			maxSeqs = max(maxSeqs, s.Seqs)
			if s.PrefillTokens > 0 && s.DecodeTokens > 0 {
				mixed++
			}
			if s.PrefillTokens > 64 || s.Seqs > 6 {
				t.Errorf("step over limits: %+v", s)
			}
		},
	})
	e.Start()
	runConcurrent(t, e, m.vocab, mixedRequests(30))
	mu.Lock()
	defer mu.Unlock()
	if maxSeqs < 2 || mixed == 0 {
		t.Fatalf("requests were not batched together (max %d seqs, %d mixed steps)", maxSeqs, mixed)
	}
	waitFor(t, "idle", func() bool { s := e.Stats(); return s.Running == 0 && s.KVBlocksUsed == 0 })
}

func TestPreemptionPreservesOutput(t *testing.T) {
	m := newFake()
	// 40 blocks of 16 = 640 tokens for 8 parallel sequences that grow to
	// ~200 tokens each: decodes run out of blocks and get preempted.
	e := newEngine(t, m, Config{Parallel: 8, PrefillChunk: 128, BlockSize: 16, NumBlocks: 40})
	e.Start()
	var reqs []Request
	for i := range 12 {
		reqs = append(reqs, Request{Prompt: prompt(20+i*7, i), MaxTokens: 150})
	}
	results := runConcurrent(t, e, m.vocab, reqs)
	st := e.Stats()
	if st.Preemptions == 0 {
		t.Fatal("expected preemptions with a small cache")
	}
	total := 0
	for _, r := range results {
		total += r.last.Timing.Preemptions
	}
	if total == 0 {
		t.Fatal("no request reports a preemption")
	}
	waitFor(t, "blocks freed", func() bool { return e.Stats().KVBlocksUsed == 0 })
}

func TestSeededSamplingIsBatchInvariant(t *testing.T) {
	m := newFake()
	seed := uint64(42)
	params := sample.Params{Temperature: 1.5, TopP: 1, RepetitionPenalty: 1, Seed: &seed, Logprobs: 3}
	req := Request{Prompt: prompt(30, 9), MaxTokens: 40, Params: params}

	alone := newEngine(t, m, Config{})
	alone.Start()
	want := collect(t, submit(t, alone, req))

	e := newEngine(t, m, Config{Parallel: 4, PrefillChunk: 16})
	e.Start()
	var others []*Stream
	for i := range 5 {
		others = append(others, submit(t, e, Request{Prompt: prompt(50+i, i), MaxTokens: 30, Params: params}))
	}
	got := collect(t, submit(t, e, req))
	for _, s := range others {
		collect(t, s)
	}
	if !slices.Equal(got.tokens, want.tokens) {
		t.Fatalf("batched %v\nalone   %v", got.tokens, want.tokens)
	}
	for i, ev := range got.events {
		if len(ev.Top) != 3 || ev.Logprob != want.events[i].Logprob {
			t.Fatalf("event %d: top %v logprob %v (alone %v)", i, ev.Top, ev.Logprob, want.events[i].Logprob)
		}
	}
}

func TestChunkedPrefillKeepsDecodesRunning(t *testing.T) {
	m := newFake()
	m.delay = 200 * time.Microsecond
	e := newEngine(t, m, Config{Parallel: 4, PrefillChunk: 512})
	e.Start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := e.Submit(ctx, Request{Prompt: prompt(10, 1), MaxTokens: 4000})
	if err != nil {
		t.Fatal(err)
	}
	<-a.Events() // a is decoding
	b := submit(t, e, Request{Prompt: prompt(2000, 2), MaxTokens: 3})
	res := collect(t, b)
	want, _ := reference(m.vocab, prompt(2000, 2), 3, nil)
	if !slices.Equal(res.tokens, want) {
		t.Fatalf("long prompt: got %v want %v", res.tokens, want)
	}
	cancel()

	// Every step that carried a chunk of b also carried a's one decode.
	var chunks []int
	for _, lens := range m.recorded() {
		decodes, chunk := 0, 0
		for _, n := range lens {
			switch {
			case n == 1:
				decodes++
			case n > 10: // not a's own 10-token prefill
				chunk = n
			}
		}
		if chunk > 0 {
			if decodes != 1 || len(lens) != 2 {
				t.Fatalf("prefill step without exactly one decode: %v", lens)
			}
			chunks = append(chunks, chunk)
		}
	}
	if !slices.Equal(chunks, []int{512, 512, 512, 464}) {
		t.Fatalf("chunks %v", chunks)
	}
}

func TestAdmissionWaitsForKV(t *testing.T) {
	m := newFake()
	m.delay = 100 * time.Microsecond
	var mu sync.Mutex
	maxRunning, sawWaiting := 0, false
	// 16 blocks of 16. A (120 prompt, 8 blocks) leaves 8; B needs 7 plus
	// a block of headroom per running sequence (2): it must wait for A.
	e := newEngine(t, m, Config{
		Parallel: 4, BlockSize: 16, NumBlocks: 16,
		OnStep: func(s StepStats) {
			mu.Lock()
			defer mu.Unlock()
			maxRunning = max(maxRunning, s.Running)
			if s.Waiting == 1 && s.Running == 1 {
				sawWaiting = true
			}
		},
	})
	e.Start()
	runConcurrent(t, e, m.vocab, []Request{
		{Prompt: prompt(120, 1), MaxTokens: 100},
		{Prompt: prompt(100, 2), MaxTokens: 50},
	})
	mu.Lock()
	defer mu.Unlock()
	if maxRunning != 1 || !sawWaiting {
		t.Fatalf("max running %d, saw waiting %v: B was admitted without blocks", maxRunning, sawWaiting)
	}
	if st := e.Stats(); st.KVBlocksUsed != 0 || st.Preemptions != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestQueueFull(t *testing.T) {
	m := newFake()
	e := newEngine(t, m, Config{Parallel: 1, MaxQueue: 2})
	// Not started: nothing leaves the queue.
	var streams []*Stream
	for range 3 {
		streams = append(streams, submit(t, e, Request{Prompt: prompt(5, 0), MaxTokens: 5}))
	}
	if _, err := e.Submit(context.Background(), Request{Prompt: prompt(5, 0), MaxTokens: 5}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("err = %v, want ErrQueueFull", err)
	}
	if st := e.Stats(); st.Waiting != 3 || st.Rejected != 1 || st.Submitted != 3 {
		t.Fatalf("stats %+v", st)
	}
	e.Start()
	for _, s := range streams {
		if r := collect(t, s); len(r.tokens) != 5 {
			t.Fatalf("got %d tokens", len(r.tokens))
		}
	}
	// Room again once they finished.
	collect(t, submit(t, e, Request{Prompt: prompt(5, 0), MaxTokens: 1}))
}

func TestSubmitValidation(t *testing.T) {
	m := newFake()
	m.maxCtx = 100
	e := newEngine(t, m, Config{})
	cases := []struct {
		r    Request
		want error
	}{
		{Request{}, ErrInvalidRequest},
		{Request{Prompt: []int32{1, 97}}, ErrInvalidRequest},
		{Request{Prompt: []int32{-1}}, ErrInvalidRequest},
		{Request{Prompt: prompt(5, 0), MaxTokens: -1}, ErrInvalidRequest},
		{Request{Prompt: prompt(100, 0)}, ErrPromptTooLong},
		{Request{Prompt: prompt(60, 0), MaxTokens: 41}, ErrPromptTooLong},
	}
	for i, c := range cases {
		if _, err := e.Submit(context.Background(), c.r); !errors.Is(err, c.want) {
			t.Errorf("case %d: err = %v, want %v", i, err, c.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Submit(ctx, Request{Prompt: prompt(5, 0)}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: %v", err)
	}
	// MaxTokens 0 means up to the context length.
	e.Start()
	r := collect(t, submit(t, e, Request{Prompt: prompt(60, 0), IgnoreEOS: true}))
	if len(r.tokens) != 40 || r.last.FinishReason != FinishLength {
		t.Fatalf("got %d tokens, %q", len(r.tokens), r.last.FinishReason)
	}
	e.Stop()
	if _, err := e.Submit(context.Background(), Request{Prompt: prompt(5, 0)}); !errors.Is(err, ErrStopped) {
		t.Fatalf("after Stop: %v", err)
	}
}

func TestContextCappedByCache(t *testing.T) {
	m := newFake()
	e := newEngine(t, m, Config{BlockSize: 16, NumBlocks: 10})
	if e.MaxContext() != 160 {
		t.Fatalf("MaxContext %d, want 160 (what the cache holds)", e.MaxContext())
	}
	if _, err := e.Submit(context.Background(), Request{Prompt: prompt(150, 0), MaxTokens: 11}); !errors.Is(err, ErrPromptTooLong) {
		t.Fatalf("err = %v", err)
	}
}

func TestStopIDsAndIgnoreEOS(t *testing.T) {
	m := newFake()
	e := newEngine(t, m, Config{})
	e.Start()
	p := prompt(25, 3)
	full, _ := reference(m.vocab, p, 50, nil)
	// Stop on the token generated at index 7, or on an earlier one that
	// matches one of the other stop ids.
	stops := []int32{full[7], 96, 0}
	want, stopped := reference(m.vocab, p, 50, stops)
	if !stopped {
		t.Fatal("reference did not stop")
	}
	k := len(want)
	r := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: 50, StopIDs: stops}))
	if !slices.Equal(r.tokens, want) {
		t.Fatalf("got %v want %v", r.tokens, want)
	}
	if r.last.FinishReason != FinishStop || r.last.Token != full[k] || r.last.Timing.GeneratedTokens != k+1 {
		t.Fatalf("terminal %+v", r.last)
	}
	r = collect(t, submit(t, e, Request{Prompt: p, MaxTokens: 50, StopIDs: stops, IgnoreEOS: true}))
	if !slices.Equal(r.tokens, full) || r.last.FinishReason != FinishLength {
		t.Fatalf("IgnoreEOS: got %d tokens, %q", len(r.tokens), r.last.FinishReason)
	}
}

func TestCancelFreesBlocks(t *testing.T) {
	for _, how := range []string{"Cancel", "ctx"} {
		t.Run(how, func(t *testing.T) {
			m := newFake()
			m.delay = 200 * time.Microsecond
			var finished []string
			var mu sync.Mutex
			e := newEngine(t, m, Config{OnFinish: func(_ Timing, reason string) {
				mu.Lock()
				finished = append(finished, reason)
				mu.Unlock()
			}})
			e.Start()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s, err := e.Submit(ctx, Request{Prompt: prompt(100, 1), MaxTokens: 5000})
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				<-s.Events()
			}
			if st := e.Stats(); st.Running != 1 || st.KVUsage == 0 {
				t.Fatalf("before cancel: %+v", st)
			}
			if how == "Cancel" {
				s.Cancel()
			} else {
				cancel()
			}
			waitFor(t, "slot and blocks freed", func() bool {
				st := e.Stats()
				return st.Running == 0 && st.KVUsage == 0 && st.KVBlocksUsed == 0 && st.Cancelled == 1
			})
			// The channel closes promptly (some events may be dropped).
			waitFor(t, "channel closed", func() bool {
				for {
					select {
					case _, ok := <-s.Events():
						if !ok {
							return true
						}
					default:
						return false
					}
				}
			})
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(finished, []string{FinishCancelled}) {
				t.Fatalf("OnFinish reasons %v", finished)
			}
		})
	}
}

func TestCancelWhileWaiting(t *testing.T) {
	m := newFake()
	e := newEngine(t, m, Config{Parallel: 1})
	s := submit(t, e, Request{Prompt: prompt(5, 0), MaxTokens: 5})
	s.Cancel()
	e.Start()
	waitFor(t, "cancelled before running", func() bool { st := e.Stats(); return st.Cancelled == 1 && st.Waiting == 0 })
	if st := e.Stats(); st.DecodeTokens != 0 || st.PrefillTokens != 0 {
		t.Fatalf("a cancelled waiting request ran: %+v", st)
	}
}

func TestForwardErrorFailsOnlyItsBatch(t *testing.T) {
	m := newFake()
	bad := errors.New("device lost")
	m.fail = func(b *backend.Batch) error {
		if slices.Contains(b.Tokens, 96) {
			return bad
		}
		return nil
	}
	e := newEngine(t, m, Config{})
	e.Start()
	r := collect(t, submit(t, e, Request{Prompt: []int32{1, 2, 96}, MaxTokens: 5}))
	if r.last.FinishReason != FinishError || !errors.Is(r.last.Err, bad) {
		t.Fatalf("terminal %+v", r.last)
	}
	m.mu.Lock()
	m.fail = nil
	m.panicOn = func(b *backend.Batch) bool { return slices.Contains(b.Tokens, 95) }
	m.mu.Unlock()
	r = collect(t, submit(t, e, Request{Prompt: []int32{95}, MaxTokens: 5}))
	if r.last.FinishReason != FinishError || r.last.Err == nil {
		t.Fatalf("panic not turned into an error: %+v", r.last)
	}
	m.mu.Lock()
	m.panicOn = nil
	m.mu.Unlock()
	// The engine keeps serving.
	p := prompt(10, 4)
	r = collect(t, submit(t, e, Request{Prompt: p, MaxTokens: 5}))
	want, _ := reference(m.vocab, p, 5, nil)
	if !slices.Equal(r.tokens, want) {
		t.Fatalf("after errors: got %v want %v", r.tokens, want)
	}
	if st := e.Stats(); st.Errors != 2 || st.KVBlocksUsed != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestStopEndsInFlightRequests(t *testing.T) {
	m := newFake()
	m.delay = 200 * time.Microsecond
	e := newEngine(t, m, Config{Parallel: 2})
	e.Start()
	var streams []*Stream
	for i := range 4 {
		streams = append(streams, submit(t, e, Request{Prompt: prompt(10, i), MaxTokens: 5000}))
	}
	<-streams[0].Events()
	e.Stop()
	e.Stop()
	for i, s := range streams {
		r := collect(t, s)
		if r.last.FinishReason != FinishError || !errors.Is(r.last.Err, ErrStopped) {
			t.Fatalf("stream %d: terminal %+v", i, r.last)
		}
	}
	if st := e.Stats(); st.Running != 0 || st.Waiting != 0 || st.KVBlocksUsed != 0 {
		t.Fatalf("after Stop: %+v", st)
	}
}

func TestStopBeforeStart(t *testing.T) {
	e := newEngine(t, newFake(), Config{})
	s := submit(t, e, Request{Prompt: prompt(5, 0), MaxTokens: 5})
	e.Stop()
	if r := collect(t, s); !errors.Is(r.last.Err, ErrStopped) {
		t.Fatalf("terminal %+v", r.last)
	}
	e.Start() // no effect after Stop
	if _, err := e.Submit(context.Background(), Request{Prompt: prompt(5, 0)}); !errors.Is(err, ErrStopped) {
		t.Fatalf("err = %v", err)
	}
}

func TestOnFinishOncePerRequest(t *testing.T) {
	m := newFake()
	var mu sync.Mutex
	count := map[string]int{}
	tokens := 0
	e := newEngine(t, m, Config{Parallel: 3, OnFinish: func(tm Timing, reason string) {
		mu.Lock()
		count[reason]++
		tokens += tm.GeneratedTokens
		mu.Unlock()
	}})
	e.Start()
	reqs := mixedRequests(10)
	runConcurrent(t, e, m.vocab, reqs)
	mu.Lock()
	defer mu.Unlock()
	want := 0
	for _, r := range reqs {
		want += r.MaxTokens
	}
	if count[FinishLength] != 10 || len(count) != 1 || tokens != want {
		t.Fatalf("OnFinish %v, %d tokens (want 10 length, %d tokens)", count, tokens, want)
	}
	if st := e.Stats(); st.Finished != 10 || st.DecodeTokens+st.PrefillTokens == 0 || st.Steps == 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestNoGoroutineLeaks(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		m := newFake()
		m.delay = 100 * time.Microsecond
		e, err := New(m, Config{Parallel: 4})
		if err != nil {
			t.Fatal(err)
		}
		e.Start()
		var wg sync.WaitGroup
		for i := range 12 {
			ctx, cancel := context.WithCancel(context.Background())
			s, err := e.Submit(ctx, Request{Prompt: prompt(10+i, i), MaxTokens: 20 + i*50})
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				defer cancel()
				n := 0
				for range s.Events() {
					// Some consumers walk away after a few tokens.
					if n++; i%3 == 0 && n == 5 {
						s.Cancel()
						return
					}
				}
			})
		}
		wg.Wait()
		// One left running when Stop comes, read to its end.
		s, err := e.Submit(context.Background(), Request{Prompt: prompt(5, 0), MaxTokens: 5000})
		if err != nil {
			t.Fatal(err)
		}
		<-s.Events()
		e.Stop()
		for range s.Events() {
		}
	}()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			n := runtime.Stack(buf, true)
			t.Fatalf("goroutines: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:n])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestIdleEngineSleeps(t *testing.T) {
	m := newFake()
	e := newEngine(t, m, Config{})
	e.Start()
	collect(t, submit(t, e, Request{Prompt: prompt(5, 0), MaxTokens: 3}))
	// BatchSize drops to 0 when the loop publishes that it goes to sleep.
	waitFor(t, "idle", func() bool { return e.Stats().BatchSize == 0 })
	steps := e.Stats().Steps
	time.Sleep(50 * time.Millisecond)
	if got := e.Stats().Steps; got != steps {
		t.Fatalf("idle engine ran %d steps", got-steps)
	}
	if n := len(m.recorded()); uint64(n) != steps {
		t.Fatalf("forward calls %d, steps %d", n, steps)
	}
}

func ExampleEngine() {
	m := newFake()
	e, _ := New(m, Config{Parallel: 4})
	e.Start()
	defer e.Stop()
	s, _ := e.Submit(context.Background(), Request{Prompt: []int32{1, 2, 3}, MaxTokens: 4})
	for ev := range s.Events() {
		if ev.Done {
			fmt.Println(ev.FinishReason, ev.Timing.GeneratedTokens)
			break
		}
	}
	// Output: length 4
}

// TestPrefillChunkByBackend: with no chunk given, a GPU backend gets the
// large chunk and the CPU default stays small; an explicit chunk wins.
func TestPrefillChunkByBackend(t *testing.T) {
	for _, c := range []struct {
		m     Model
		chunk int
		want  int
	}{{newFake(), 0, DefaultPrefillChunk}, {gpuModel{newFake()}, 0, DefaultPrefillChunkGPU}, {gpuModel{newFake()}, 300, 300}} {
		e := newEngine(t, c.m, Config{Parallel: 2, PrefillChunk: c.chunk})
		if e.cfg.PrefillChunk != c.want || e.cfg.MaxBatchTokens != c.want+2 {
			t.Errorf("%s backend, chunk %d: got chunk %d, batch tokens %d; want %d", c.m.Backend().Name(), c.chunk,
				e.cfg.PrefillChunk, e.cfg.MaxBatchTokens, c.want)
		}
	}
}

// TestMixedBatchTokensByBackend: an accelerator caps the steps that decode
// at DefaultMixedBatchTokensGPU (more with many slots), the CPU not at all;
// an explicit value wins, a negative one turns the cap off.
func TestMixedBatchTokensByBackend(t *testing.T) {
	for _, c := range []struct {
		m             Model
		parallel, set int
		want          int
	}{{newFake(), 2, 0, 0}, {gpuModel{newFake()}, 2, 0, DefaultMixedBatchTokensGPU}, {gpuModel{newFake()}, 4000, 0, 4256},
		{gpuModel{newFake()}, 2, 512, 512}, {gpuModel{newFake()}, 2, -1, 0}} {
		e := newEngine(t, c.m, Config{Parallel: c.parallel, MixedBatchTokens: c.set})
		if e.cfg.MixedBatchTokens != c.want {
			t.Errorf("%s backend, parallel %d, set %d: MixedBatchTokens %d, want %d", c.m.Backend().Name(), c.parallel, c.set,
				e.cfg.MixedBatchTokens, c.want)
		}
	}
}
