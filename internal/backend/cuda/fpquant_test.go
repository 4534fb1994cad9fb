//go:build linux

package cuda

import (
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/quant"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// TestFPScales checks the scale words the kernels read, without a GPU:
// bf16 of the decoded scale times 2^14 (4 bits) or 2^8 (8 bits), and an
// error for scales bf16 cannot hold.
func TestFPScales(t *testing.T) {
	for _, c := range []struct {
		mode string
		bits int
		b    byte
		want float32
	}{
		{quant.MXFP4, 4, 127, 1 << 14}, {quant.MXFP4, 4, 119, 1 << 6}, {quant.MXFP8, 8, 127, 1 << 8},
		{quant.NVFP4, 4, 0x38, 1 << 14}, {quant.NVFP4, 4, 0x3c, 1.5 * (1 << 14)}, {quant.NVFP4, 4, 0x01, 1.0 / 512 * (1 << 14)},
		{quant.MXFP4, 4, 0, 0x1p-113},
	} {
		sb, err := fpScales(c.mode, c.bits, []byte{c.b}, false)
		if err != nil {
			t.Fatalf("%s 0x%02x: %v", c.mode, c.b, err)
		}
		got := tensor.BF16ToF32(uint16(sb[0]) | uint16(sb[1])<<8)
		if got != c.want || sb[2] != 0 || sb[3] != 0 {
			t.Errorf("%s 0x%02x: scale word %v = %g, want %g", c.mode, c.b, sb, got, c.want)
		}
	}
	// nvfp4 pairs: two scales a word.
	sb, err := fpScales(quant.NVFP4, 4, []byte{0x38, 0x3c}, true)
	if err != nil || len(sb) != 4 || tensor.BF16ToF32(uint16(sb[0])|uint16(sb[1])<<8) != 1<<14 ||
		tensor.BF16ToF32(uint16(sb[2])|uint16(sb[3])<<8) != 1.5*(1<<14) {
		t.Errorf("nvfp4 pair: %v, %v", sb, err)
	}
	for _, c := range []struct {
		mode string
		bits int
		b    byte
	}{{quant.MXFP4, 4, 241}, {quant.MXFP8, 8, 255}, {quant.NVFP4, 4, 0x7f}} {
		if _, err := fpScales(c.mode, c.bits, []byte{c.b}, false); err == nil {
			t.Errorf("%s 0x%02x: no error", c.mode, c.b)
		}
	}
}

// fpWeight is a made-up device weight in mode of shape [experts, out, in]
// (experts 1: a matrix), as uploadFP describes it.
func fpWeight(mode string, experts, out, in int, at uintptr) *weight {
	w := &weight{shape: []int{experts, out, in}, experts: experts, out: out, in: in, w: at, sb: at + 1<<28}
	w.setFP(mode)
	return w
}

// TestRecordFPQuant checks, without a GPU, which kernels the floating-point
// modes record and that their arguments match the kernels' parameters:
// one row on the multi-matrix GEMV (nvfp4 on the rows kernel: its groups
// of 16 are half a chunk), a few rows on the rows kernels, the embedding,
// and MoE decode (mx modes on the three-launch path, nvfp4 on the GEMVs).
func TestRecordFPQuant(t *testing.T) {
	sigs := kernelSignatures(t)
	for _, c := range []struct {
		mode                 string
		one, rows, moe, embd string
	}{
		{quant.MXFP4, "qgemvm4_fp", "qgemv4_fp_4", "moe_gateup4_fp_g64", "embedq_fp"},
		{quant.MXFP8, "qgemvm8_fp", "qgemv8_fp_4", "moe_gateup8_fp", "embedq_fp"},
		{quant.NVFP4, "qgemvm4_fp2", "qgemv4_fp2_4", "moe_gateup4_fp2_g64", "embedq_fp2"},
		// nvfp4 rows of an odd count of groups (4112 = 257 x 16, 2888): a
		// scale word a group; rows not of whole 16-byte chunks take the
		// generic kernel (the experts' down rows of 2880 are pairs again).
		{quant.NVFP4 + "/odd", "qgemvgen_fp", "qgemvgen_fp", "qgemvgen_fp", "embedq_fp"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			b := hostOnlyBackend()
			mode, K, H := c.mode, 4096, 2880
			if strings.HasSuffix(mode, "/odd") {
				mode, K, H = quant.NVFP4, 4112, 2888
			}
			w := fpWeight(mode, 1, 2880, K, 1<<30)
			x1, y1 := &Tensor{ptr: 1 << 32, rows: 1, cols: K}, &Tensor{ptr: 1<<32 + 1<<24, rows: 1, cols: 2880}
			x3, y3 := &Tensor{ptr: 1 << 33, rows: 3, cols: K}, &Tensor{ptr: 1<<33 + 1<<24, rows: 3, cols: 2880}
			b.Linear(y1, x1, w, nil)
			b.Linear(y3, x3, w, nil)
			e := &Tensor{ptr: 1 << 34, rows: 1, cols: K}
			b.Embed(e, w)
			// gpt-oss-20b's experts: 32 of 2880 x 2880, top-4, router bf16.
			rw := &weight{shape: []int{32, H}, experts: 1, out: 32, in: H, dtype: tensor.BF16, w: 1 << 35}
			gw, uw := fpWeight(mode, 32, 2880, H, 1<<36), fpWeight(mode, 32, 2880, H, 1<<37)
			dw := fpWeight(mode, 32, H, 2880, 1<<38)
			h, o := &Tensor{ptr: 1 << 39, rows: 1, cols: H}, &Tensor{ptr: 1<<39 + 1<<24, rows: 1, cols: H}
			b.MoE(o, h, rw, backend.Experts{Gate: gw, Up: uw, Down: dw}, backend.MoEParams{TopK: 4, Renorm: true, Act: backend.SiLU})
			names := launchNames(b)
			for i, want := range []string{c.one, c.rows, c.embd} {
				if names[i] != want {
					t.Errorf("launch %d: %s, want %s", i, names[i], want)
				}
			}
			if count(names, c.moe) == 0 {
				t.Errorf("MoE launches %v have no %s", names[3:], c.moe)
			}
			checkLaunches(t, b, sigs)
		})
	}
}
