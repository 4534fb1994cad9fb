package plan

import "testing"

func TestMoEGEMMFrom(t *testing.T) {
	def := DefaultTuning()
	for _, c := range []struct {
		name    string
		t       Tuning
		E, topk int
		fp      bool
		want    int
	}{
		{"Qwen3-30B-A3B: 1.5 pairs an expert", def, 128, 8, false, 24},
		{"Qwen3.5-35B-A3B: 256 experts, capped at the per-token path's end", def, 256, 8, false, MoEDecodeMaxTokens},
		{"Mixtral: 8 experts, top 2, the fewest measured", def, 8, 2, false, 8},
		{"gpt-oss-20b: mxfp4 from 8", def, 32, 4, true, 8},
		{"gpt-oss-120b: mxfp4 from 8", def, 128, 4, true, 8},
		{"odd ratio rounds up", def, 100, 6, false, 25},
		{"the tuning overrides", Tuning{MoEGEMMRows: 3}, 128, 8, false, 3},
	} {
		if got := MoEGEMMFrom(c.t, c.E, c.topk, c.fp); got != c.want {
			t.Errorf("%s: MoEGEMMFrom = %d, want %d", c.name, got, c.want)
		}
	}
}
