package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rssBytes reads the process's resident set size.
func rssBytes(t testing.TB) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// peakRSS samples the RSS every 2 ms while f runs and returns the peak
// growth over the RSS before it.
func peakRSS(t testing.TB, f func()) int64 {
	t.Helper()
	base := rssBytes(t)
	var peak atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if r := rssBytes(t); r > peak.Load() {
				peak.Store(r)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	f()
	close(stop)
	<-done
	return peak.Load() - base
}

// bigBodies are 15 MiB request bodies for each endpoint that takes text.
func bigBodies() map[string][]byte {
	text := strings.Repeat("Once upon a time, there was a little girl named Lily. \"She\" liked to play.\n", 15<<20/78)
	enc := func(v any) []byte { b, _ := json.Marshal(v); return b }
	return map[string][]byte{
		"/v1/completions":      enc(map[string]any{"prompt": text, "max_tokens": 4}),
		"/v1/chat/completions": enc(map[string]any{"messages": []any{map[string]any{"role": "user", "content": text}}, "max_tokens": 4}),
		"/tokenize":            enc(map[string]any{"content": text, "with_pieces": true}),
	}
}

func postBytes(t testing.TB, s *testServer, path string, body []byte) int {
	resp, err := s.ts.Client().Post(s.url+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body) // kept, it would be garbage of this process
	return resp.StatusCode
}

// TestLargeBodyMemory measures what a 15 MiB body costs: the peak RSS
// growth of one request must stay under 400 MB, and 8 at once under 2 GB with /health answering meanwhile (the byte budget turns the excess away with 503s;
// docs/server.md has the figures).
func TestLargeBodyMemory(t *testing.T) {
	s := startServer(t, loadModel(t, ""), Options{})
	bodies := bigBodies()
	for _, path := range []string{"/v1/completions", "/v1/chat/completions", "/tokenize"} {
		debug.FreeOSMemory()
		var code int
		start := time.Now()
		grew := peakRSS(t, func() { code = postBytes(t, s, path, bodies[path]) })
		t.Logf("%s: one 15 MiB body: %d in %v, peak RSS growth %d MB", path, code, time.Since(start).Round(time.Millisecond), grew>>20)
		// /tokenize too: the embedded tokenizer merges its whole text as
		// one word (no pre-tokenizer), in pieces (tokenizer/longword.go).
		limit := int64(400 << 20)
		if grew > limit {
			t.Errorf("%s: a 15 MiB body grew the RSS by %d MB (limit %d)", path, grew>>20, limit>>20)
		}
	}
	for _, path := range []string{"/v1/completions", "/tokenize"} {
		debug.FreeOSMemory()
		base := rssBytes(t)
		var slowest atomic.Int64
		grew := peakRSS(t, func() {
			var wg sync.WaitGroup
			stop := make(chan struct{})
			go func() {
				for {
					select {
					case <-stop:
						return
					case <-time.After(50 * time.Millisecond):
					}
					t0 := time.Now()
					resp, err := http.Get(s.url + "/health")
					if err == nil {
						resp.Body.Close()
					}
					if d := time.Since(t0); int64(d) > slowest.Load() {
						slowest.Store(int64(d))
					}
				}
			}()
			var codes sync.Map
			for i := range 8 {
				wg.Go(func() { codes.Store(i, postBytes(t, s, path, bodies[path])) })
			}
			wg.Wait()
			count := map[int]int{}
			codes.Range(func(_, v any) bool { count[v.(int)]++; return true })
			t.Logf("%s: 8 at once answered %v", path, count)
			close(stop)
		})
		t.Logf("%s: 8 bodies of 15 MiB at once: peak RSS growth %d MB, slowest /health %v", path, grew>>20, time.Duration(slowest.Load()))
		if grew > 2<<30 {
			t.Errorf("%s: 8 concurrent 15 MiB bodies grew the RSS by %d MB (limit 2048)", path, grew>>20)
		}
		// The figure is 1 s (docs/server.md: 0.24-0.7 s measured); the test
		// allows 2 s for the load of this shared 2-core machine.
		if time.Duration(slowest.Load()) > 2*time.Second {
			t.Errorf("%s: /health took %v during the large bodies", path, time.Duration(slowest.Load()))
		}
		// The server hands the memory back by itself (releaseBody); the
		// Go runtime alone would keep it for minutes.
		var after int64
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if after = rssBytes(t) - base; after < 100<<20 {
				break
			}
		}
		t.Logf("%s: RSS growth %d MB after the bodies", path, after>>20)
		if after >= 100<<20 {
			t.Errorf("%s: RSS still %d MB above the start 5 s after the large bodies", path, after>>20)
		}
	}
}
