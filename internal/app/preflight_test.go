package app

import (
	"errors"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/memplan"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// A profile whose KV cache cannot fit host memory stops before any
// synthetic weight is built; the same request sized down loads.
func TestProfilePreflight(t *testing.T) {
	// qwen2.5-0.5b at f32 on the cpu: 24 layers x 2 x 2 heads x 64 x 4 =
	// 24 KiB a token; 1024 slots x 32768 tokens is 768 GiB.
	big := &memplan.Request{Parallel: 1024, CtxSize: 32768}
	_, err := LoadProfile(ProfileOptions{Profile: "qwen2.5-0.5b-4bit", Backend: "cpu", Preflight: big})
	if err == nil || !strings.Contains(err.Error(), "memory preflight: synthetic:qwen2.5-0.5b-4bit on cpu needs about") ||
		!strings.Contains(err.Error(), "KV cache 768.00 GiB for 33554432 tokens") {
		t.Fatalf("err = %v", err)
	}
	l, err := LoadProfile(ProfileOptions{Profile: "qwen2.5-0.5b-4bit", Backend: "cpu", Preflight: &memplan.Request{Parallel: 1, CtxSize: 256}})
	if err != nil {
		t.Fatal(err)
	}
	l.Model.Backend().Close()
}

// refusingBackend keeps no fp8 KV (as a GPU backend may not).
type refusingBackend struct{ backend.Backend }

func (refusingBackend) CheckKVDtype(d backend.KVDtype) error {
	if d == backend.KVFP8 {
		return errors.New("test: --kv-cache-dtype fp8 is not supported")
	}
	return nil
}

// A KV dtype the backend refuses stops the preflight before the estimate
// (so before any weight loads), with the backend's own message; one it
// keeps passes.
func TestPreflightRefusesKVDtype(t *testing.T) {
	cfg, err := weights.LoadConfig(testdata + "models/stories260k")
	if err != nil {
		t.Fatal(err)
	}
	be, err := backend.New("cpu", backend.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	r := refusingBackend{be}
	err = Preflight(cfg, testdata+"models/stories260k", r, memplan.Request{Parallel: 1, CtxSize: 256, KVDtype: backend.KVFP8}, "stories260k")
	if err == nil || !strings.Contains(err.Error(), "--kv-cache-dtype fp8 is not supported") {
		t.Fatalf("fp8 on a backend that refuses it: %v", err)
	}
	if err := Preflight(cfg, testdata+"models/stories260k", r, memplan.Request{Parallel: 1, CtxSize: 256, KVDtype: backend.KVBF16}, "stories260k"); err != nil {
		t.Fatalf("bf16: %v", err)
	}
}
