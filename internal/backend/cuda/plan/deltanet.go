package plan

// DeltaChunkMin is the fewest positions of a sequence in a step that take
// Gated DeltaNet's chunked kernels (kernels/deltanet_chunk.cu) rather than
// the recurrent scan. Chosen by arithmetic, not yet measured: the
// recurrent scan costs ~0.9 us a position and layer for one sequence
// (s13r4's TestBenchDeltaNet at Qwen3.5-35B-A3B's shapes), the chunked
// scan ~15 us a chunk of up to 64 (four 64x32 products of ~1M FMA a block
// at ~40-60 FMA a cycle and SM, plus staging) and its prep launch a few
// us more, so the chunked form wins from ~20-25 positions; 32 leaves a
// margin for the estimate.
const DeltaChunkMin = 32
