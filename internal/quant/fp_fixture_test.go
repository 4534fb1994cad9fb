package quant_test

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"github.com/mlxcel/mlxcel/internal/quant"
	"github.com/mlxcel/mlxcel/internal/tensor"
	"github.com/mlxcel/mlxcel/internal/weights"
)

const tiny = "../../../shared/testdata/tiny/"

func openST(t *testing.T, dir string) *weights.File {
	t.Helper()
	f, err := weights.OpenFile(tiny + dir + "/model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func tensorBytes(t *testing.T, f *weights.File, name string) ([]byte, []int) {
	t.Helper()
	info, ok := f.Tensors[name]
	if !ok {
		t.Fatalf("%s: tensor %s is missing", f.Path, name)
	}
	return f.Bytes(info), info.Shape
}

func floats(t *testing.T, f *weights.File, name string) ([]float32, []int) {
	t.Helper()
	b, shape := tensorBytes(t, f, name)
	out := make([]float32, len(b)/2)
	if err := tensor.ToFloat32(out, b, tensor.BF16); err != nil {
		t.Fatal(err)
	}
	return out, shape
}

// transposeExperts turns HF gpt-oss's [E, in, out] expert tensors into
// per-expert [out, in] rows, the quantized layout.
func transposeExperts(w []float32, e, in, out int) []float32 {
	r := make([]float32, len(w))
	for x := range e {
		for i := range in {
			for o := range out {
				r[x*in*out+o*in+i] = w[x*in*out+i*out+o]
			}
		}
	}
	return r
}

// TestMXFP4FixtureRequantizes checks the quantizer and the layout against
// the fixtures: the bf16 twin's experts quantized with MLX's rule give the
// -mxfp4 dir's blocks and scales byte for byte, and the -mlx dir's
// gate_proj/up_proj are its gate_up rows ::2 / 1::2 with the same bytes.
func TestMXFP4FixtureRequantizes(t *testing.T) {
	bf, oai, mlx := openST(t, "gpt_oss-bf16"), openST(t, "gpt_oss-mxfp4"), openST(t, "gpt_oss-mlx-mxfp4-q8g64")
	const E, H, I = 4, 64, 96
	for l := range 4 {
		pre := fmt.Sprintf("model.layers.%d.mlp.experts.", l)
		for _, c := range []struct {
			name    string
			in, out int
		}{{"gate_up_proj", H, 2 * I}, {"down_proj", I, H}} {
			w, _ := floats(t, bf, pre+c.name)
			rows := transposeExperts(w, E, c.in, c.out)
			packed, scales, err := quant.QuantizeFP(quant.MXFP4, rows, E*c.out, c.in)
			if err != nil {
				t.Fatal(err)
			}
			blocks, bshape := tensorBytes(t, oai, pre+c.name+"_blocks")
			sc, _ := tensorBytes(t, oai, pre+c.name+"_scales")
			if want := []int{E, c.out, c.in / 32, 16}; fmt.Sprint(bshape) != fmt.Sprint(want) {
				t.Fatalf("%s_blocks shape %v, want %v", c.name, bshape, want)
			}
			if !bytes.Equal(packed, blocks) || !bytes.Equal(scales, sc) {
				t.Fatalf("layer %d %s: re-quantized bf16 differs from the mxfp4 checkpoint", l, c.name)
			}
			// Every value within half the widest E2M1 step (1 at scale 1).
			dq, err := quant.DequantizeFP(quant.MXFP4, blocks, sc, E*c.out, c.in)
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range dq {
				s := quant.E8M0(sc[i/32])
				// Beyond 6*s the code saturates at +-6*s.
				bound := max(float64(s), math.Abs(float64(rows[i]))-6*float64(s))
				if d := math.Abs(float64(v - rows[i])); d > bound {
					t.Fatalf("layer %d %s element %d: %v dequantized from %v (scale %v)", l, c.name, i, v, rows[i], s)
				}
			}
		}
		// mlx-lm's sanitize: gate rows ::2, up rows 1::2, bytes unchanged.
		blocks, _ := tensorBytes(t, oai, pre+"gate_up_proj_blocks")
		sc, _ := tensorBytes(t, oai, pre+"gate_up_proj_scales")
		rb, sb := H/2, H/32
		for j, name := range []string{"gate_proj", "up_proj"} {
			got, _ := tensorBytes(t, mlx, pre+name+".weight")
			gsc, _ := tensorBytes(t, mlx, pre+name+".scales")
			for x := range E {
				for o := range I {
					src := x*2*I + 2*o + j
					dst := x*I + o
					if !bytes.Equal(got[dst*rb:(dst+1)*rb], blocks[src*rb:(src+1)*rb]) ||
						!bytes.Equal(gsc[dst*sb:(dst+1)*sb], sc[src*sb:(src+1)*sb]) {
						t.Fatalf("layer %d %s expert %d row %d: mlx bytes differ from the openai blocks", l, name, x, o)
					}
				}
			}
		}
	}
}
