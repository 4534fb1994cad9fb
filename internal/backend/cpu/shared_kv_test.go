package cpu

import (
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// A Shared layer (Gemma 4's KV-shared layers) keeps no K/V: its memory is
// the reason for sharing. Its neighbours keep theirs, rings included.
func TestSharedLayerKeepsNoKV(t *testing.T) {
	l := backend.KVLayer{KVHeads: 2, HeadDim: 16, Window: 8}
	sh := l
	sh.Shared = true
	kv, err := New(1).NewKVStore(backend.KVSpec{NumBlocks: 4, BlockSize: 16, Layers: []backend.KVLayer{l, sh, {KVHeads: 2, HeadDim: 16}},
		Slots: 2, RingTokens: 24})
	if err != nil {
		t.Fatal(err)
	}
	s := kv.(*kvStore)
	if got, want := s.bytes(0), 4*2*2*24*2*16; got != want {
		t.Errorf("windowed layer: %d bytes, want %d", got, want)
	}
	if got := s.bytes(1); got != 0 {
		t.Errorf("shared layer: %d bytes, want 0", got)
	}
	if got, want := s.bytes(2), 4*2*4*16*2*16; got != want {
		t.Errorf("full layer: %d bytes, want %d", got, want)
	}
}
