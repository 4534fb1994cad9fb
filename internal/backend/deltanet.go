package backend

// Gated DeltaNet linear attention (Qwen3.5 / Qwen3-Next hybrid models): a
// layer with no K/V but a constant-size recurrent state per sequence,
// kept by the KV store next to the paged K/V of the attention layers.

// FeatureGatedDeltaNet: the backend is a DeltaNetBackend and its KV store
// keeps the per-slot state of layers whose KVLayer.DeltaNet is set.
const FeatureGatedDeltaNet Feature = "Gated DeltaNet linear attention (DeltaNetBackend, KVLayer.DeltaNet)"

// FeatureSigmoidGate: GatedAct takes the Sigmoid activation, with a gate
// of one column applied to the whole row (Qwen's shared-expert gate).
const FeatureSigmoidGate Feature = "sigmoid gates (GatedAct Sigmoid, one-column gates)"

// DeltaNetParams are one Gated DeltaNet layer's shapes.
type DeltaNetParams struct {
	KHeads, VHeads int // VHeads a multiple of KHeads: value head h reads key head h/(VHeads/KHeads)
	KDim, VDim     int // per-head key and value widths
	ConvKernel     int // width of the causal depthwise conv over the q|k|v channels
	// ChunkSize is the prefill chunk of the delta rule (the reference's
	// 64): positions are taken this many at a time, each chunk solved in
	// matrix form, the state carried from one chunk to the next.
	ChunkSize int
}

// Channels is the conv's width: q, k and v side by side.
func (p DeltaNetParams) Channels() int { return 2*p.KHeads*p.KDim + p.VHeads*p.VDim }

// StateFloats is one sequence's state in float32 values: the last
// ConvKernel-1 conv inputs and a [KDim, VDim] matrix per value head.
func (p DeltaNetParams) StateFloats() int {
	return (p.ConvKernel-1)*p.Channels() + p.VHeads*p.KDim*p.VDim
}

// DeltaNetWeights are a layer's parameters beyond its projections.
type DeltaNetWeights struct {
	Conv   Weight // [Channels, 1, ConvKernel] or [Channels, ConvKernel, 1]: the same values in order
	ALog   Weight // [VHeads]: the decay rate is -exp(A_log)
	DtBias Weight // [VHeads]
}

// DeltaNetBackend runs the core of a Gated DeltaNet layer.
type DeltaNetBackend interface {
	// GatedDeltaNet writes to dst ([tokens, VHeads*VDim]) the delta rule's
	// output for the projections qkv ([tokens, Channels]) and a, b
	// ([tokens, VHeads]), per sequence of the step, reading and updating
	// that sequence's state in kv (its SeqSlice.Slot):
	//
	//  1. x = silu(causal depthwise conv of qkv over the sequence's
	//     positions, the stored last ConvKernel-1 inputs before them);
	//  2. q, k, v = x split by channel; q and k L2-normalised per head
	//     (eps 1e-6 inside the square root), q times KDim^-0.5;
	//  3. beta = sigmoid(b), decay = exp(-exp(A_log) * softplus(a + dt_bias));
	//  4. per value head with state S [KDim, VDim]: S = decay*S;
	//     S += k (beta*(v - k·S)); out = q·S. Several tokens of one
	//     sequence run in chunks of ChunkSize, one token as that step.
	//
	// A sequence whose first token in the step is at position 0 starts
	// from a zero state; otherwise its positions must continue the ones the
	// state has absorbed.
	GatedDeltaNet(dst, qkv, a, b Tensor, w DeltaNetWeights, kv KVStore, layer int, p DeltaNetParams)
}
