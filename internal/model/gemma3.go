package model

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// Gemma 3 text decoder, following transformers' modeling_gemma3.py
// (Gemma3TextModel / Gemma3DecoderLayer), on the layer Gemma 4 shares
// (gemma.go):
//
//   - embeddings times sqrt(hidden) (exact in float32, as the reference);
//   - every RMSNorm (layer, q/k and final) scales by 1+w: the stored
//     weight w is offset by one on the host before upload, so the backend's
//     RMSNorm stays the one op (mlx-lm keeps w in its checkpoints too);
//   - attention scale query_pre_attn_scalar^-0.5, no v norm, optional
//     attn_logit_softcapping and final_logit_softcapping;
//   - layer i is sliding unless (i+1) % sliding_window_pattern == 0 when
//     the config has no layer_types; the last layer is not forced global;
//   - sliding layers rotate with rope_local_base_freq (default rope), global
//     ones with rope_theta and rope_scaling (linear x8 on 4B-27B), unless
//     transformers 5's rope_parameters gives each layer type its own.
//
// The multimodal "gemma3" (Gemma3ForConditionalGeneration) runs its
// text_config; the vision tower is skipped by the checkpoint reader.
func init() {
	Register("gemma3_text", buildGemma3)
	Register("gemma3", buildGemma3)
}

// gemma3LayerTypes returns layer_types, or the pattern's types.
func gemma3LayerTypes(cfg *weights.Config) ([]string, error) {
	return periodicLayerTypes(cfg, []string{"sliding_window_pattern", "_sliding_window_pattern"}, 6, "sliding_attention")
}

// gemma3Rope is the rope of a layer type.
func gemma3Rope(cfg *weights.Config, typ string) weights.RopeConfig {
	if rc, ok := cfg.RopeByLayerType[typ]; ok {
		return rc
	}
	if typ == "full_attention" {
		return cfg.Rope
	}
	local := 10000.0
	if f, ok := cfg.Raw["rope_local_base_freq"].(float64); ok {
		local = f
	}
	return weights.RopeConfig{Type: "default", Theta: local, PartialRotaryFactor: 1}
}

func buildGemma3(cfg *weights.Config, src Source, m *Model) error {
	if cfg.Raw["use_bidirectional_attention"] == true {
		return fmt.Errorf("gemma3: bidirectional attention (use_bidirectional_attention) is not supported")
	}
	types, err := gemma3LayerTypes(cfg)
	if err != nil {
		return err
	}
	norm := func(name string, n int) (backend.Weight, error) { return onePlusNorm(src, m.be, name, n) }
	if err := loadTopNorm(cfg, src, m, norm); err != nil {
		return err
	}
	m.EmbedScale = float32(math.Sqrt(float64(cfg.Hidden)))
	m.FinalSoftcap = float32(cfg.FinalLogitSoftcap)
	qScalar := float64(cfg.HeadDim)
	if f, ok := cfg.Raw["query_pre_attn_scalar"].(float64); ok {
		qScalar = f
	}
	if !(qScalar > 0) {
		return fmt.Errorf("query_pre_attn_scalar %v must be positive", qScalar)
	}
	return buildGemmaLayers(cfg, src, m, gemmaSpec{
		types:    types,
		geometry: func(int, bool) (int, int) { return cfg.HeadDim, cfg.KVHeads },
		rope:     func(typ string) weights.RopeConfig { return gemma3Rope(cfg, typ) },
		scale:    func(int) float32 { return float32(1 / math.Sqrt(qScalar)) },
		norm:     norm,
	})
}

// onePlusNorm uploads 1+w for the stored norm weight w (float32: the
// reference computes the norm in float32, and bf16(1+w) would round).
func onePlusNorm(src Source, be backend.Backend, name string, n int) (backend.Weight, error) {
	return derivedNorm(src, be, name, n, func(w float32) float32 { return 1 + w })
}

// derivedNorm uploads f(w) for each element w of a stored float vector,
// in float32.
func derivedNorm(src Source, be backend.Backend, name string, n int, f func(float32) float32) (backend.Weight, error) {
	v, stored, err := hostFloats(src, name, n)
	if err != nil {
		return nil, err
	}
	data := make([]byte, 4*n)
	for i, w := range v {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(f(w)))
	}
	h := &tensor.Host{Name: name, Shape: []int{n}, DType: tensor.F32, Data: data}
	if u, ok := src.(hostUploader); ok {
		return u.UploadHost(h, stored)
	}
	return be.UploadWeight(h)
}

// hostUploader is a source that uploads a tensor the model derived on the
// host from one of its own, accounting for the stored one's bytes
// (progress, uploaded totals), as if it had been uploaded unchanged.
type hostUploader interface {
	UploadHost(h *tensor.Host, stored int64) (backend.Weight, error)
}

// UploadHost uploads a derived tensor, reported as the stored bytes.
func (c *checkpointSource) UploadHost(h *tensor.Host, stored int64) (backend.Weight, error) {
	w, err := backend.Upload(c.be, h)
	if err == nil && c.onTensor != nil {
		c.onTensor(h.Name, stored)
	}
	return w, err
}
