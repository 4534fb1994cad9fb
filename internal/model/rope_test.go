package model

import (
	"math"
	"testing"

	"github.com/mlxcel/mlxcel/internal/weights"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b)) }

// YaRN's attention factor: 0.1*ln(factor)+1, or the mscale ratio when
// both mscale and mscale_all_dim are set, or the configured value.
func TestYarnAttentionFactor(t *testing.T) {
	base := weights.RopeConfig{Type: "yarn", Theta: 10000, Factor: 40, OriginalMaxPosition: 4096, PartialRotaryFactor: 1, Truncate: true}
	for _, tc := range []struct {
		name string
		edit func(*weights.RopeConfig)
		want float64
	}{
		{"default", func(*weights.RopeConfig) {}, 0.1*math.Log(40) + 1},
		{"mscale ratio", func(r *weights.RopeConfig) { r.Mscale, r.MscaleAllDim = 0.707, 1 }, (0.0707*math.Log(40) + 1) / (0.1*math.Log(40) + 1)},
		{"equal mscales", func(r *weights.RopeConfig) { r.Mscale, r.MscaleAllDim = 1, 1 }, 1},
		{"mscale alone", func(r *weights.RopeConfig) { r.Mscale = 0.707 }, 0.1*math.Log(40) + 1},
		{"configured", func(r *weights.RopeConfig) { r.AttentionFactor = 0.5 }, 0.5},
		{"factor from contexts", func(r *weights.RopeConfig) { r.Factor, r.MaxPosition = 0, 4096*8 }, 0.1*math.Log(8) + 1},
	} {
		r := base
		tc.edit(&r)
		got, err := ropeFor(r, 64)
		if err != nil {
			t.Fatal(err)
		}
		if !near(float64(got.Scale), tc.want, 1e-6) {
			t.Errorf("%s: attention factor %v, want %v", tc.name, got.Scale, tc.want)
		}
	}
}

// The ramp: high-frequency pairs (many turns over the original context)
// keep the default frequency, low-frequency ones are divided by the
// factor, and between the bounds the blend is linear. gpt-oss's numbers
// with truncate false: dim 64, theta 150000, original 4096, betas 32/1.
func TestYarnRamp(t *testing.T) {
	r := weights.RopeConfig{Type: "yarn", Theta: 150000, Factor: 32, OriginalMaxPosition: 4096, PartialRotaryFactor: 1}
	got, err := ropeFor(r, 64)
	if err != nil {
		t.Fatal(err)
	}
	corr := func(rot float64) float64 { return 64 * math.Log(4096/(rot*2*math.Pi)) / (2 * math.Log(150000)) }
	low, high := corr(32), corr(1) // 8.09.., 17.39..: fractional, as truncate false keeps them
	for i, f := range got.InvFreq {
		def := math.Pow(150000, -float64(2*i)/64)
		ramp := math.Min(math.Max((float64(i)-low)/(high-low), 0), 1)
		want := def/32*ramp + def*(1-ramp)
		if !near(float64(f), want, 2e-6) {
			t.Errorf("pair %d: inv freq %v, want %v", i, f, want)
		}
	}
	if got.InvFreq[0] != 1 || !near(float64(got.InvFreq[31]), math.Pow(150000, -62.0/64)/32, 1e-6) {
		t.Errorf("ends: %v %v", got.InvFreq[0], got.InvFreq[31])
	}
	// truncate (the default) rounds the bounds out to 8 and 18.
	r.Truncate = true
	tr, _ := ropeFor(r, 64)
	for i, f := range tr.InvFreq {
		def := math.Pow(150000, -float64(2*i)/64)
		ramp := math.Min(math.Max((float64(i)-8)/10, 0), 1)
		if want := def/32*ramp + def*(1-ramp); !near(float64(f), want, 2e-6) {
			t.Errorf("truncated pair %d: inv freq %v, want %v", i, f, want)
		}
	}
	if a, b := float64(tr.InvFreq[17]), float64(got.InvFreq[17]); math.Abs(a-b) < 0.1*b {
		t.Errorf("pair 17: truncated %v, untruncated %v, want them apart", tr.InvFreq[17], got.InvFreq[17])
	}
}

// LongRoPE divides each frequency by its factor: the long ones when the
// served context exceeds the original, the short ones otherwise; the
// attention factor is sqrt(1 + ln(factor)/ln(original)).
func TestLongrope(t *testing.T) {
	r := weights.RopeConfig{Type: "longrope", Theta: 10000, PartialRotaryFactor: 1, OriginalMaxPosition: 4096, MaxPosition: 131072,
		ShortFactor: []float64{1, 2, 3, 4}, LongFactor: []float64{5, 6, 7, 8}}
	got, err := ropeFor(r, 8)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range got.InvFreq {
		if want := math.Pow(10000, -float64(2*i)/8) / r.LongFactor[i]; !near(float64(f), want, 1e-6) {
			t.Errorf("pair %d: %v, want %v", i, f, want)
		}
	}
	if want := math.Sqrt(1 + math.Log(32)/math.Log(4096)); !near(float64(got.Scale), want, 1e-6) {
		t.Errorf("attention factor %v, want %v", got.Scale, want)
	}
	r.MaxPosition = 4096
	short, _ := ropeFor(r, 8)
	if want := math.Pow(10000, -2.0/8) / 2; !near(float64(short.InvFreq[1]), want, 1e-6) || short.Scale != 1 {
		t.Errorf("short: %v scale %v", short.InvFreq, short.Scale)
	}
	r.ShortFactor = r.ShortFactor[:3]
	if _, err := ropeFor(r, 8); err == nil {
		t.Error("3 factors for 4 frequencies accepted")
	}
}

// Dynamic NTK within max_position_embeddings is the default rope.
func TestDynamicIsDefaultWithinContext(t *testing.T) {
	d, _ := ropeFor(weights.RopeConfig{Type: "dynamic", Factor: 4, Theta: 10000, PartialRotaryFactor: 1}, 16)
	p, _ := ropeFor(weights.RopeConfig{Type: "default", Theta: 10000, PartialRotaryFactor: 1}, 16)
	for i := range p.InvFreq {
		if d.InvFreq[i] != p.InvFreq[i] || d.Scale != 1 {
			t.Fatalf("dynamic %v, default %v", d.InvFreq, p.InvFreq)
		}
	}
}
