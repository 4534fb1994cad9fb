package cpu

import "testing"

// The copy rate is a real measurement: positive, and below an absurd
// bound (1 TB/s is beyond any host's memory).
func TestCopyGBps(t *testing.T) {
	b := New(2)
	gbps, err := b.CopyGBps(64 << 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("host copy: %.1f GB/s", gbps)
	if !(gbps > 0.1 && gbps < 1000) {
		t.Fatalf("copy rate %v GB/s", gbps)
	}
	if _, err := b.CopyGBps(0); err == nil {
		t.Fatal("a copy of 0 bytes has no rate")
	}
}
