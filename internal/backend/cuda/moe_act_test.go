//go:build linux

package cuda

import "testing"

// TestMoEActBlocks: moe_act's grid y gives a full tile ~8 elements a
// thread, at least moeYS blocks and at most 64.
func TestMoEActBlocks(t *testing.T) {
	for _, c := range []struct{ inter, want int }{
		{768, 12},   // Qwen3-30B-A3B
		{2880, 45},  // gpt-oss
		{64, moeYS}, // narrow experts keep the floor
		{1 << 20, 64},
	} {
		if got := moeActBlocks(c.inter); got != c.want {
			t.Errorf("moeActBlocks(%d) = %d, want %d", c.inter, got, c.want)
		}
	}
}
