package plan

// DeltaChunkMin is the fewest positions of a sequence in a step that take
// Gated DeltaNet's chunked kernels (kernels/deltanet_chunk.cu) rather than
// the recurrent scan. Measured on the H200 (s15b, TestBenchDeltaNet, one
// Qwen3.5-35B-A3B linear layer, one sequence): 64 positions 130 us chunked
// against 78 recurrent, 512 366 against 489, 2048 1231 against 1821: the
// chunked form costs ~0.6 us a position plus ~90 us, the recurrent one
// 0.9-1.2 us a position, so they meet near 200-250 positions.
const DeltaChunkMin = 256
