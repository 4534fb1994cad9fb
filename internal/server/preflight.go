package server

import "github.com/mlxcel/mlxcel/internal/memplan"

// preflight is the memory check the loader runs for these flags: the KV
// cache sized as engineConfig sizes it (internal/memplan).
func (f *Flags) preflight() *memplan.Request {
	o := f.Options
	return &memplan.Request{CtxSize: o.CtxSize, Parallel: o.Parallel, KVBlocks: o.KVBlocks, BlockSize: o.BlockSize,
		KVMemMiB: o.KVMemMiB, DefaultPerSeq: DefaultKVTokensPerSeq, PrefillChunk: o.PrefillChunk, KVDtype: o.KVCacheDtype, Skip: f.SkipMemCheck}
}
