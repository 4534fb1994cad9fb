package engine

import (
	"fmt"
	"sync"
	"time"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// fakeBackend only creates KV stores; the fake model does its own math.
// Any other backend method panics (nil embedded interface), which would
// show up as a test failure.
type fakeBackend struct{ backend.Backend }

func (fakeBackend) Name() string { return "fake" }

// Supports: the fake store keeps rings (FeatureRings).
func (fakeBackend) Supports(f backend.Feature) bool { return f == backend.FeatureRings }

func (fakeBackend) NewKVStore(spec backend.KVSpec) (backend.KVStore, error) {
	slots := make([]int32, spec.NumBlocks*spec.BlockSize)
	for i := range slots {
		slots[i] = -1
	}
	k := &fakeKV{spec: spec, slots: slots}
	for _, l := range spec.Layers {
		k.window = max(k.window, l.Window)
	}
	if k.window > 0 && spec.Slots > 0 && spec.RingTokens > 0 {
		k.ring = make([]ringEntry, spec.Slots*spec.RingTokens)
		for i := range k.ring {
			k.ring[i].pos = -1
		}
	}
	return k, nil
}

// fakeKV stores, per slot, the token written there: enough to recompute a
// sequence's history from its block table the way attention would. With a
// windowed layer and rings in the spec it also keeps a ring per sequence
// slot, as a backend would for sliding-window layers, and checks every
// row's window read from it against the paged history.
type fakeKV struct {
	spec   backend.KVSpec
	slots  []int32
	window int
	ring   []ringEntry // nil: no rings
}

// ringEntry is what a ring position holds: the token and the absolute
// position it was written for (-1: never written), so a read of a
// position another sequence or a later key overwrote is caught.
type ringEntry struct{ tok, pos int32 }

func (k *fakeKV) Spec() backend.KVSpec { return k.spec }

// fakeModel is deterministic: the next token is a hash of the whole
// history (token and position of every earlier token), read back through
// the block table from what earlier steps wrote to the KV store. So a
// wrong block table, a wrong position, a skipped chunk or a row mix-up all
// change the output, while a correct engine reproduces exactly what
// reference() computes without any batching.
type fakeModel struct {
	vocab, maxCtx int
	window        int           // > 0: a second, sliding-window layer
	delay         time.Duration // per Forward, to keep requests in flight

	mu      sync.Mutex
	batches [][]int // per Forward: each sequence's token count
	fail    func(b *backend.Batch) error
	panicOn func(b *backend.Batch) bool
	// writable, when set, must approve every block a row's KV is written
	// to (kvcache.Manager.Writable: held alone, not prefix-cached).
	writable func(block int32) bool
}

func newFake() *fakeModel { return &fakeModel{vocab: 97, maxCtx: 8192} }

func (m *fakeModel) Vocab() int               { return m.vocab }
func (m *fakeModel) MaxContext() int          { return m.maxCtx }
func (m *fakeModel) Backend() backend.Backend { return fakeBackend{} }
func (m *fakeModel) KVLayers() []backend.KVLayer {
	l := []backend.KVLayer{{KVHeads: 1, HeadDim: 1}}
	if m.window > 0 {
		l = append(l, backend.KVLayer{KVHeads: 1, HeadDim: 1, Window: m.window})
	}
	return l
}

func (m *fakeModel) recorded() [][]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([][]int(nil), m.batches...)
}

const hashSeed = uint64(1469598103934665603)

func hashStep(h uint64, tok int32, pos int) uint64 {
	h ^= uint64(uint32(tok)) | uint64(pos)<<32
	h *= 1099511628211
	h ^= h >> 29
	return h
}

func nextToken(h uint64, vocab int) int32 { return int32(h % uint64(vocab)) }

// logitsFor puts a clear maximum on the next token.
func logitsFor(row []float32, next int32) {
	for i := range row {
		row[i] = float32(i%7) * 0.1
	}
	row[next] = 10
}

func (m *fakeModel) Forward(b *backend.Batch, kv backend.KVStore) ([]float32, error) {
	if m.delay > 0 {
		time.Sleep(m.delay)
	}
	m.mu.Lock()
	fail, panicOn, writable := m.fail, m.panicOn, m.writable
	lens := make([]int, len(b.Seqs))
	for i, s := range b.Seqs {
		lens[i] = s.Len
	}
	m.batches = append(m.batches, lens)
	m.mu.Unlock()
	if panicOn != nil && panicOn(b) {
		panic("fake model panic")
	}
	if fail != nil {
		if err := fail(b); err != nil {
			return nil, err
		}
	}
	store := kv.(*fakeKV)
	bs := store.spec.BlockSize
	if len(b.Tokens) == 0 || len(b.Positions) != len(b.Tokens) {
		return nil, fmt.Errorf("bad batch: %d tokens %d positions", len(b.Tokens), len(b.Positions))
	}
	// Write phase, with the checks a backend would rely on.
	rowSeq := make([]int, len(b.Tokens))
	next := 0
	for si, s := range b.Seqs {
		if s.Start != next || s.Len < 1 {
			return nil, fmt.Errorf("seq %d: rows [%d,+%d) not contiguous at %d", si, s.Start, s.Len, next)
		}
		next += s.Len
		for r := s.Start; r < s.Start+s.Len; r++ {
			tok, pos := b.Tokens[r], int(b.Positions[r])
			if tok < 0 || int(tok) >= m.vocab {
				return nil, fmt.Errorf("token %d out of range", tok)
			}
			if r > s.Start && pos != int(b.Positions[r-1])+1 {
				return nil, fmt.Errorf("seq %d: positions not consecutive", si)
			}
			if pos/bs >= len(s.Blocks) {
				return nil, fmt.Errorf("seq %d: position %d beyond its %d blocks", si, pos, len(s.Blocks))
			}
			if writable != nil && !writable(s.Blocks[pos/bs]) {
				return nil, fmt.Errorf("seq %d: position %d written into block %d, which is shared or cached", si, pos, s.Blocks[pos/bs])
			}
			store.slots[int(s.Blocks[pos/bs])*bs+pos%bs] = tok
			rowSeq[r] = si
		}
	}
	if next != len(b.Tokens) {
		return nil, fmt.Errorf("seqs cover %d of %d rows", next, len(b.Tokens))
	}
	if store.ring != nil {
		if err := store.checkRing(b); err != nil {
			return nil, err
		}
	}
	// Read phase: each logits row hashes its sequence's cached history.
	out := make([]float32, len(b.LogitRows)*m.vocab)
	for i, r := range b.LogitRows {
		s := b.Seqs[rowSeq[r]]
		h := hashSeed
		for p := 0; p <= int(b.Positions[r]); p++ {
			tok := store.slots[int(s.Blocks[p/bs])*bs+p%bs]
			if tok < 0 {
				return nil, fmt.Errorf("position %d never written", p)
			}
			h = hashStep(h, tok, p)
		}
		logitsFor(out[i*m.vocab:(i+1)*m.vocab], nextToken(h, m.vocab))
	}
	return out, nil
}

// reference is what greedy decoding of prompt gives with no engine at all:
// the generated tokens, stopping at a stop id (not included; reported as
// stopped) or after maxTokens.
func reference(vocab int, prompt []int32, maxTokens int, stop []int32) (out []int32, stopped bool) {
	h := hashSeed
	for p, t := range prompt {
		h = hashStep(h, t, p)
	}
	pos := len(prompt)
	for len(out) < maxTokens {
		t := nextToken(h, vocab)
		for _, s := range stop {
			if s == t {
				return out, true
			}
		}
		out = append(out, t)
		h = hashStep(h, t, pos)
		pos++
	}
	return out, false
}

// prompt makes a deterministic prompt of n tokens, different per salt.
func prompt(n, salt int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32((i*31 + salt*17 + 3) % 97)
	}
	return p
}

// checkRing writes the step's tokens to the sequences' rings, then checks
// that every row's window, read back from its ring, is the sequence's own
// history: a slot shared by two running sequences, changed while a
// sequence runs, or a chunk too long for the ring all show as a mismatch.
func (k *fakeKV) checkRing(b *backend.Batch) error {
	R, bs := k.spec.RingTokens, k.spec.BlockSize
	used := map[int]bool{}
	for si, s := range b.Seqs {
		if s.Slot < 0 || s.Slot >= k.spec.Slots || used[s.Slot] {
			return fmt.Errorf("seq %d: slot %d out of range or shared in one step", si, s.Slot)
		}
		used[s.Slot] = true
		if k.window-1+s.Len > R {
			return fmt.Errorf("seq %d: %d-token chunk overflows the %d-token ring", si, s.Len, R)
		}
		for r := s.Start; r < s.Start+s.Len; r++ {
			pos := b.Positions[r]
			k.ring[s.Slot*R+int(pos)%R] = ringEntry{tok: b.Tokens[r], pos: pos}
		}
	}
	for si, s := range b.Seqs {
		for r := s.Start; r < s.Start+s.Len; r++ {
			pos := int(b.Positions[r])
			for p := max(0, pos-k.window+1); p <= pos; p++ {
				e := k.ring[s.Slot*R+p%R]
				if want := k.slots[int(s.Blocks[p/bs])*bs+p%bs]; int(e.pos) != p || e.tok != want {
					return fmt.Errorf("seq %d slot %d: ring holds token %d of position %d where position %d has token %d", si, s.Slot, e.tok, e.pos, p, want)
				}
			}
		}
	}
	return nil
}

// gpuBackend is an accelerator, as the CUDA backend is.
type gpuBackend struct{ fakeBackend }

func (gpuBackend) DeviceName() string { return "fake GPU" }

// gpuModel is the fake model on an accelerator backend.
type gpuModel struct{ *fakeModel }

func (gpuModel) Backend() backend.Backend { return gpuBackend{} }
