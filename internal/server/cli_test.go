package server

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/engine"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

func parseFlags(t *testing.T, args ...string) (*Flags, error) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f Flags
	f.Register(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return &f, f.check()
}

func TestFlags(t *testing.T) {
	f, err := parseFlags(t, "--model", "/m", "--host", "0.0.0.0", "--port", "9000", "--parallel", "4", "--ctx-size", "2048",
		"--kv-mem", "64", "--max-queue", "10", "--prefill-chunk", "256", "--api-key", "k", "--served-model-name", "x",
		"--backend", "cpu", "--threads", "2")
	if err != nil {
		t.Fatal(err)
	}
	o := f.Options
	if f.Model != "/m" || f.Host != "0.0.0.0" || f.Port != 9000 || o.Parallel != 4 || o.CtxSize != 2048 || o.KVMemMiB != 64 ||
		o.MaxQueue != 10 || o.PrefillChunk != 256 || o.APIKey != "k" || o.ServedModelName != "x" || f.Backend != "cpu" || f.Threads != 2 {
		t.Errorf("parsed %+v", f)
	}
	// Defaults.
	f, _ = parseFlags(t, "-m", "/d")
	if f.Model != "/d" || f.Host != "127.0.0.1" || f.Port != 8080 || f.Options.PrefillChunk != 0 { // 0: the engine picks by backend
		t.Errorf("defaults %+v", f)
	}
	if f.Options.KVCacheDtype.Or(backend.KVAuto) != backend.KVAuto {
		t.Errorf("--kv-cache-dtype defaults to %s", f.Options.KVCacheDtype)
	}
	if f, _ = parseFlags(t, "--itl-target", "80ms"); f.Options.ITLTarget != 80*time.Millisecond {
		t.Errorf("--itl-target 80ms parsed as %v", f.Options.ITLTarget)
	}
	if f, _ = parseFlags(t, "--kv-cache-dtype", "fp8_e4m3"); f.Options.KVCacheDtype != backend.KVFP8 {
		t.Errorf("--kv-cache-dtype fp8_e4m3 parsed as %q", f.Options.KVCacheDtype)
	}
	for _, bad := range [][]string{{"--kv-mem", "8", "--kv-blocks", "8"}, {"--parallel", "-1"}, {"--port", "70000"}, {"--ctx-size", "-1"},
		{"--gpu-memory-utilization", "0"}, {"--gpu-memory-utilization", "1.5"}, {"--kv-cache-dtype", "int8"}, {"--itl-target", "-1s"}} {
		if _, err := parseFlags(t, bad...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestKVMem: --kv-mem sizes the cache from the model's KV geometry (float32
// K and V per layer).
func TestKVMem(t *testing.T) {
	l := loadModel(t, "")
	s := New(Options{KVMemMiB: 1})
	cfg, err := s.engineConfig(l)
	if err != nil {
		t.Fatal(err)
	}
	per := kvCost(l, engine.Config{BlockSize: 16}).PerBlock
	var want int64 // float32 K and V of every layer, 16 tokens (the CPU backend)
	for _, layer := range l.Model.KVLayers() {
		want += 2 * int64(layer.KVHeads) * int64(layer.HeadDim) * 4 * 16
	}
	if per != want {
		t.Errorf("block of %d bytes, want %d", per, want)
	}
	if cfg.NumBlocks != int((1<<20)/per) || cfg.NumBlocks < 1 {
		t.Errorf("1 MiB: %d blocks of %d bytes", cfg.NumBlocks, per)
	}
	if err := s.Ready(l); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Engine().Config().NumBlocks; got != cfg.NumBlocks {
		t.Errorf("engine has %d blocks, want %d", got, cfg.NumBlocks)
	}
}

// With --kv-cache-dtype fp8 the same --kv-mem holds four times the
// blocks (one byte a value against the CPU's four), and the engine keeps
// that dtype.
func TestKVMemFP8(t *testing.T) {
	l := loadModel(t, "")
	f32, err := New(Options{KVMemMiB: 1}).engineConfig(l)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{KVMemMiB: 1, KVCacheDtype: backend.KVFP8})
	cfg, err := s.engineConfig(l)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NumBlocks < 4*f32.NumBlocks || cfg.NumBlocks > 4*f32.NumBlocks+3 {
		t.Errorf("fp8: %d blocks in 1 MiB, f32 %d", cfg.NumBlocks, f32.NumBlocks)
	}
	if err := s.Ready(l); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Engine().KVStore().Spec().Dtype; got != backend.KVFP8 {
		t.Errorf("engine store dtype %q", got)
	}
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serveReady runs the command's serve loop on the embedded model with
// args after the test's defaults, and returns once the model is ready: its
// address, its log, the cancel that shuts it down and serve's result.
func serveReady(t *testing.T, args ...string) (base string, logs *syncBuffer, cancel context.CancelFunc, done chan error) {
	t.Helper()
	f, err := parseFlags(t, append([]string{"--port", "0", "--backend", "cpu", "--threads", "2"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	logs = &syncBuffer{}
	f.Options.Logger = slog.New(slog.NewTextHandler(logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan error, 1)
	go func() { done <- f.serve(ctx) }()
	addr := regexp.MustCompile(`addr=(http://\S+)`)
	waitFor(t, func() bool {
		m := addr.FindStringSubmatch(logs.String())
		if m != nil {
			base = m[1]
		}
		return m != nil && strings.Contains(logs.String(), "model ready")
	})
	return base, logs, cancel, done
}

// TestServeLifecycle runs the command's serve loop: it listens, loads the
// default model, answers, and returns cleanly when its context ends (what
// SIGINT/SIGTERM do).
func TestServeLifecycle(t *testing.T) {
	f, err := parseFlags(t, "--port", "0", "--backend", "cpu", "--threads", "2", "--parallel", "2")
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	f.Options.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	f.ShutdownTimeout = 5 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.serve(ctx) }()

	addr := regexp.MustCompile(`addr=(http://\S+)`)
	var base string
	waitFor(t, func() bool {
		if m := addr.FindStringSubmatch(logs.String()); m != nil {
			base = m[1]
			return true
		}
		return false
	})
	waitFor(t, func() bool {
		resp, err := http.Get(base + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"Once","max_tokens":4}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("completion: %d", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after shutdown")
	}
	if _, err := http.Get(base + "/health"); err == nil {
		t.Error("still listening after shutdown")
	}
}

// TestServeGracePeriod: a request still running when the grace period
// ends is stopped (its stream ends with an error event) and serve returns.
func TestServeGracePeriod(t *testing.T) {
	base, logs, cancel, done := serveReady(t, "--shutdown-timeout", "1ms")
	resp, err := http.Post(base+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"Once","max_tokens":480,"ignore_eos":true,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	st := &sseStream{resp: resp, rd: bufio.NewReader(resp.Body)}
	if _, err := st.next(); err != nil {
		t.Fatal(err)
	}
	cancel()
	var events []string
	for {
		data, err := st.next()
		if err != nil {
			t.Fatalf("the stream broke instead of ending: %v", err)
		}
		if data == "[DONE]" {
			break
		}
		events = append(events, data)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after the grace period")
	}
	if !strings.Contains(logs.String(), "grace period over") {
		t.Errorf("the request outlived a 1ms grace period unstopped; log:\n%s", logs.String())
	}
	if last := events[len(events)-1]; !strings.Contains(last, `"shutting_down"`) {
		t.Errorf("last event %.200s, want the shutting_down error", last)
	}
}
