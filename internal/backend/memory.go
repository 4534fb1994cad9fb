package backend

// MemoryReporter is implemented by device backends that can say how much
// of their memory is free; the memory preflight (internal/memplan) checks
// a model against it before loading. Backends without it are checked
// against host memory (cpu) or not at all.
type MemoryReporter interface {
	// MemoryInfo returns free and total device memory in bytes.
	MemoryInfo() (free, total int64, err error)
}

// KVSizer is implemented by a backend that says how many bytes its
// NewKVStore(spec) allocates; the memory estimates and the server's KV
// sizing ask it, so they count what that backend keeps (rings, shared and
// recurrent layers differ between backends).
type KVSizer interface {
	KVStoreBytes(spec KVSpec) int64
}

// KVDtypeChecker is a backend that keeps only some KV dtypes: the server
// asks it before the weights load (app's preflight), so a refused
// --kv-cache-dtype costs no load. NewKVStore refuses the same dtypes.
type KVDtypeChecker interface {
	CheckKVDtype(d KVDtype) error
}

// CheckKVDtype is be's answer for d, nil for a backend without
// KVDtypeChecker (it keeps every dtype).
func CheckKVDtype(be Backend, d KVDtype) error {
	if c, ok := be.(KVDtypeChecker); ok {
		return c.CheckKVDtype(d)
	}
	return nil
}

// KVFreer is a backend that can give a KV store's memory back before it
// closes (a GPU backend otherwise keeps every store until Close). The
// store must not be used afterwards.
type KVFreer interface {
	FreeKVStore(kv KVStore) error
}

// FreeKVStore gives kv's memory back when be can (KVFreer); otherwise the
// store is left to the garbage collector or to be.Close. Benchmarks that
// make a store per point call it, so their points do not add up.
func FreeKVStore(be Backend, kv KVStore) error {
	if f, ok := be.(KVFreer); ok {
		return f.FreeKVStore(kv)
	}
	return nil
}

// KVStoreBytes is what be.NewKVStore(spec) allocates. A backend without
// KVSizer is taken to keep every layer's K and V in the paged blocks at
// spec.Dtype (KVElemBytes for auto), which is what one that knows no rings
// does.
func KVStoreBytes(be Backend, spec KVSpec) int64 {
	if s, ok := be.(KVSizer); ok {
		return s.KVStoreBytes(spec)
	}
	elem := spec.Dtype.Bytes()
	if elem == 0 {
		elem = KVElemBytes(be)
	}
	var n int64
	for _, l := range spec.Layers {
		n += 2 * int64(spec.NumBlocks*spec.BlockSize*l.KVHeads*l.HeadDim) * int64(elem)
	}
	return n
}

// KVCost is a KV store's size as a function of its block count:
// Fixed + blocks*PerBlock. The paged layers grow with the blocks; the
// recurrent state and the sliding-window rings are per slot, fixed.
type KVCost struct {
	PerBlock, Fixed int64
}

// KVCostOf is spec's cost on be (spec.NumBlocks is ignored): the store is
// sized at one and two blocks, which is exact as long as the backend's
// size is affine in the block count, as every store here is.
func KVCostOf(be Backend, spec KVSpec) KVCost {
	spec.NumBlocks = 1
	one := KVStoreBytes(be, spec)
	spec.NumBlocks = 2
	per := KVStoreBytes(be, spec) - one
	return KVCost{PerBlock: per, Fixed: one - per}
}

// Bytes is the store's size at blocks blocks.
func (c KVCost) Bytes(blocks int) int64 { return c.Fixed + int64(blocks)*c.PerBlock }

// Blocks is how many blocks budget holds beside the fixed part (0: none;
// a store with no paged layer holds any number, capped at max).
func (c KVCost) Blocks(budget int64, max int) int {
	room := budget - c.Fixed
	switch {
	case room < 0:
		return 0
	case c.PerBlock <= 0 || room/c.PerBlock >= int64(max):
		return max
	}
	return int(room / c.PerBlock)
}
