//go:build linux

package cuda

import (
	"testing"
	"time"
)

// TestIdleClock checks, without a GPU, that the device-idle clock splits
// one idle period into its parts, whose sum is the total, and counts
// nothing while the device is busy (no drain since the last launch).
func TestIdleClock(t *testing.T) {
	var c idleClock
	c.stepBegin() // busy: nothing counted
	c.launched()
	if c.t.Gaps != 0 || c.t.Total != 0 {
		t.Fatalf("counted while busy: %+v", c.t)
	}
	pause := func() { time.Sleep(2 * time.Millisecond) }
	for range 2 {
		c.drained()
		pause()
		c.stepBegin()
		pause()
		c.stepBegun()
		pause()
		c.flushBegin()
		pause()
		c.launched()
	}
	h := c.t
	if h.Gaps != 2 {
		t.Fatalf("gaps %d, want 2", h.Gaps)
	}
	if sum := h.Before + h.Inputs + h.Record + h.Launch; sum != h.Total {
		t.Errorf("parts sum to %v, total %v", sum, h.Total)
	}
	for name, d := range map[string]time.Duration{"before": h.Before, "inputs": h.Inputs, "record": h.Record, "launch": h.Launch} {
		if d < 4*time.Millisecond {
			t.Errorf("%s: %v over two periods of 2 ms pauses", name, d)
		}
	}
	c.launched() // the device is busy again: no third gap
	if c.t.Gaps != 2 {
		t.Errorf("gaps %d after a launch while busy", c.t.Gaps)
	}
}
