package backend

// Comm is one rank's handle on the collectives of a tensor-parallel group
// (docs/tensor-parallel.md). Every rank of the group makes the same calls
// in the same order, each with its own backend's tensors; a call returns
// when its result is in this rank's tensor.
type Comm interface {
	Rank() int
	Size() int
	// AllReduce sums t over the ranks, in place on every rank. The sum
	// runs in rank order, so every rank gets the same bits.
	AllReduce(t Tensor)
	// AllGather writes the ranks' src side by side into every rank's dst:
	// dst row i is row i of rank 0's src, then rank 1's, and so on (the
	// vocabulary-split LM head's logits). dst.Cols() is the sum of the
	// ranks' src.Cols(); src widths may differ.
	AllGather(dst, src Tensor)
}

// ShardEmbedder is a backend that embeds from a vocabulary shard
// (tensor parallelism's split embedding, vLLM's VocabParallelEmbedding):
// the table holds rows [lo, lo+table rows) of the vocabulary, and a
// token outside them gets a zero row, so the all-reduce of the ranks'
// outputs is the full embedding.
type ShardEmbedder interface {
	EmbedShard(dst Tensor, table Weight, lo int)
}
