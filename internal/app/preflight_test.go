package app

import (
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/memplan"
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
