//go:build linux

package cuda

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cuda/plan"
)

// stepInfo locates the current batch description in the step buffer.
type stepInfo struct {
	tokens, seqs, logitRows int
	btStride                int
	tok, pos, tok2seq       uintptr // device int32 arrays
	rows, btab              uintptr
	decode                  bool    // every sequence has one token
	maxLen                  int     // longest sequence slice of the step
	maxCtx                  int     // largest position + 1 (the longest context)
	tiles                   uintptr // flash attention: (first row, rows) per query tile
	ntiles                  int
	consecutive             bool // each sequence's positions are consecutive
	// sinfo: per sequence (first row, rows, slot), for the per-slot
	// recurrent state (ops_deltanet.go); seqs and positions as the host
	// gave them, for its checks at record time.
	sinfo    uintptr
	hostSeqs []backend.SeqSlice
	hostPos  []int32
}

// BeginStep uploads the batch description into the step buffer with one
// copy: [tokens | positions | token->sequence | logit rows | block tables |
// flash tiles | per-sequence (start, len, slot)].
// Block tables are padded to a power-of-two width so that decode steps of
// growing sequences keep the same kernel arguments (and so the same
// graph) until a table outgrows that width.
func (b *Backend) BeginStep(batch *backend.Batch) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.bind()()
	b.flush()
	b.idle.stepBegin()
	defer b.idle.stepBegun()
	b.profileStep()
	if b.err != nil {
		err := b.err
		b.err = nil
		return err
	}
	T := len(batch.Tokens)
	if len(batch.Positions) != T {
		return fmt.Errorf("cuda: batch has %d tokens but %d positions", T, len(batch.Positions))
	}
	n, width := 0, 1
	for _, s := range batch.Seqs {
		if s.Start != n || s.Len <= 0 {
			return fmt.Errorf("cuda: batch sequences must cover the tokens in order")
		}
		n += s.Len
		for width < len(s.Blocks) {
			width *= 2
		}
	}
	if n != T {
		return fmt.Errorf("cuda: batch sequences cover %d of %d tokens", n, T)
	}
	for _, r := range batch.LogitRows {
		if r < 0 || r >= T {
			return fmt.Errorf("cuda: logit row %d outside the %d-token batch", r, T)
		}
	}
	S, L := len(batch.Seqs), len(batch.LogitRows)
	// Query tiles for flash attention: runs of up to plan.FlashTile rows of one
	// sequence.
	ntiles, maxLen, consecutive := 0, 0, true
	maxCtx := 0
	for _, p := range batch.Positions {
		maxCtx = max(maxCtx, int(p)+1)
	}
	for _, s := range batch.Seqs {
		ntiles += (s.Len + plan.FlashTile - 1) / plan.FlashTile
		maxLen = max(maxLen, s.Len)
		for r := s.Start + 1; r < s.Start+s.Len; r++ {
			consecutive = consecutive && batch.Positions[r] == batch.Positions[r-1]+1
		}
	}
	host := make([]int32, 3*T+L+S*width+2*ntiles+3*S)
	copy(host, batch.Tokens)
	copy(host[T:], batch.Positions)
	for i, s := range batch.Seqs {
		for r := s.Start; r < s.Start+s.Len; r++ {
			host[2*T+r] = int32(i)
		}
		copy(host[3*T+L+i*width:], s.Blocks)
	}
	for i, r := range batch.LogitRows {
		host[3*T+i] = int32(r)
	}
	tl := host[3*T+L+S*width:]
	for _, s := range batch.Seqs {
		for st := 0; st < s.Len; st += plan.FlashTile {
			tl[0], tl[1] = int32(s.Start+st), int32(min(plan.FlashTile, s.Len-st))
			tl = tl[2:]
		}
	}
	for i, s := range batch.Seqs {
		tl[3*i], tl[3*i+1], tl[3*i+2] = int32(s.Start), int32(s.Len), int32(s.Slot)
	}
	if err := b.grow(&b.stepBuf, 4*len(host)); err != nil {
		return err
	}
	if err := b.checkFeed(batch.Tokens); err != nil {
		return err
	}
	if len(host) > 0 {
		// Queued on b.strm behind the previous step, whose kernels finish
		// reading the buffer before it changes; the host goes on to record
		// this step meanwhile (async.go).
		if err := b.uploadAsync(b.stepBuf.ptr, host); err != nil {
			return err
		}
	}
	base := b.stepBuf.ptr
	b.step = stepInfo{tokens: T, seqs: S, logitRows: L, btStride: width,
		tok: base, pos: base + uintptr(4*T), tok2seq: base + uintptr(8*T),
		rows: base + uintptr(12*T), btab: base + uintptr(4*(3*T+L)),
		decode: maxLen == 1, maxLen: maxLen, maxCtx: maxCtx, tiles: base + uintptr(4*(3*T+L+S*width)), ntiles: ntiles, consecutive: consecutive,
		sinfo: base + uintptr(4*(3*T+L+S*width+2*ntiles)), hostSeqs: batch.Seqs, hostPos: batch.Positions}
	b.inStep = true
	b.arena.reset()
	b.pool.recycle()
	return nil
}

// launch is one recorded kernel launch (or a cuBLAS call, fn == fnGemm).
// It holds no Go pointers, so a step's launches can be hashed and compared
// as plain bytes.
type launch struct {
	fn                      uintptr
	gx, gy, gz, block, smem uint32
	n                       uint32 // arguments used
	cz                      uint32 // cluster depth (blocks along z), 0 or 1: none
	_                       uint32 // (zero: launches are hashed as bytes; args starts 8-byte aligned)
	kinds                   uint64 // 2 bits an argument, argKind: checked against the kernels' signatures by tests
	args                    [32]uint64
}

// argKind is how a launch argument was passed: what its kernel parameter
// must be (TestLaunchSignatures reads the preprocessed kernel source).
type argKind uint64

const (
	argPtr argKind = iota // a device address: any pointer parameter
	argI32                // int
	argI64                // long long
	argF32                // float
)

// kind is argument i's argKind.
func (l *launch) kind(i int) argKind { return argKind(l.kinds>>(2*i)) & 3 }

func (l *launch) push(v uint64, k argKind) *launch {
	l.args[l.n] = v
	l.kinds |= uint64(k) << (2 * l.n)
	l.n++
	return l
}

const fnGemm = 1

// recorder collects a step's launches until something needs results.
type recorder struct {
	ls     []launch
	params [32]unsafe.Pointer
	gemm   bool
	cfg    launchConfig  // runEx's arguments: not on the goroutine stack,
	attrs  [2]launchAttr // which may move while C reads them
}

func (b *Backend) newLaunch(name string, gx, gy, gz, block int) *launch {
	return b.newLaunchFn(b.fn(name), name, gx, gy, gz, block)
}

// newLaunchFn is newLaunch with kernel name's handle fn already known (the
// decode step's products and MoE launches take it from their memos: a
// lookup by name for every launch was a tenth of a step's recording).
func (b *Backend) newLaunchFn(fn uintptr, name string, gx, gy, gz, block int) *launch {
	if gx <= 0 || gy <= 0 || gz <= 0 {
		panic(fmt.Sprintf("cuda: %s launched with grid %dx%dx%d", name, gx, gy, gz))
	}
	b.rec.ls = append(b.rec.ls, launch{fn: fn, gx: uint32(gx), gy: uint32(gy), gz: uint32(gz), block: uint32(block)})
	return &b.rec.ls[len(b.rec.ls)-1]
}

func (l *launch) p(v uintptr) *launch { return l.push(uint64(v), argPtr) }
func (l *launch) i(v int) *launch     { return l.push(uint64(uint32(int32(v))), argI32) }
func (l *launch) i64(v int) *launch   { return l.push(uint64(v), argI64) }
func (l *launch) f(v float32) *launch { return l.push(uint64(math.Float32bits(v)), argF32) }

// gridFor is a grid-stride launch size: enough blocks to fill the device.
func (b *Backend) gridFor(n int) int {
	return max(1, min((n+255)/256, b.SMs*8))
}

func (b *Backend) fill(p uintptr, v float32, n int) {
	b.newLaunch("fill_f32", b.gridFor(n), 1, 1, 256).p(p).f(v).i64(n)
}

// run launches l directly on the stream. Arguments are passed by address:
// each slot is 8 bytes and the driver reads as many as the parameter's
// size, which is right for 4-byte values on a little-endian machine.
func (b *Backend) run(l *launch) error {
	if l.fn == fnGemm {
		return b.runGemm(l)
	}
	for i := uint32(0); i < l.n; i++ {
		b.rec.params[i] = unsafe.Pointer(&l.args[i])
	}
	if b.pdl || l.cz > 1 {
		return b.runEx(l)
	}
	r, _, _ := purego.SyscallN(b.d.LaunchKernel, l.fn, uintptr(l.gx), uintptr(l.gy), uintptr(l.gz),
		uintptr(l.block), 1, 1, uintptr(l.smem), b.strm, uintptr(unsafe.Pointer(&b.rec.params[0])), 0)
	return b.d.Check("cuLaunchKernel", r)
}

// launchConfig and launchAttr mirror CUlaunchConfig and CUlaunchAttribute
// (cuda.h): the attribute is a 4-byte id padded to 8, then a 64-byte union.
type launchConfig struct {
	gx, gy, gz, bx, by, bz, smem uint32
	_                            uint32
	stream                       uintptr
	attrs                        *launchAttr
	nattrs                       uint32
	_                            uint32
}

type launchAttr struct {
	id    uint32
	_     uint32
	value [64]byte
}

// CUlaunchAttributeID values: CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION and
// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION.
const (
	attrClusterDimension          = 4
	attrProgrammaticSerialization = 6
)

// runEx launches l through cuLaunchKernelEx, with programmatic dependent
// launch when it is on and a cluster dimension when l has one.
//
// Programmatic dependent launch (Hopper): its
// blocks may be scheduled once every block of the previous kernel has
// started (each kernel calls griddepcontrol.launch_dependents early), and
// they wait in griddepcontrol.wait for that kernel's results. A decode
// step is ~300 short kernels; this hides each one's launch and ramp-up
// behind its predecessor's tail, and lets a GEMV start streaming its
// weights (which no kernel writes) before its input is ready. Every
// kernel calls grid_dep_wait before touching data another kernel wrote
// (kernels/common.cu; TestKernelsWaitForPredecessors checks the sources).
func (b *Backend) runEx(l *launch) error {
	attrs := &b.rec.attrs
	n := 0
	if b.pdl {
		attrs[n] = launchAttr{id: attrProgrammaticSerialization}
		attrs[n].value[0] = 1
		n++
	}
	if l.cz > 1 { // dims x, y, z as three uint32
		attrs[n] = launchAttr{id: attrClusterDimension}
		binary.LittleEndian.PutUint32(attrs[n].value[0:], 1)
		binary.LittleEndian.PutUint32(attrs[n].value[4:], 1)
		binary.LittleEndian.PutUint32(attrs[n].value[8:], l.cz)
		n++
	}
	cfg := &b.rec.cfg
	*cfg = launchConfig{gx: l.gx, gy: l.gy, gz: l.gz, bx: l.block, by: 1, bz: 1, smem: l.smem, stream: b.strm,
		attrs: &attrs[0], nattrs: uint32(n)}
	r, _, _ := purego.SyscallN(b.d.LaunchKernelEx, uintptr(unsafe.Pointer(cfg)), l.fn,
		uintptr(unsafe.Pointer(&b.rec.params[0])), 0)
	return b.d.Check("cuLaunchKernelEx", r)
}

// flush runs what was recorded: by replaying a captured graph when this
// exact launch sequence was captured before, by capturing it when it is
// seen for the second time (a step shape that repeats), else directly.
// Keying graphs by the launches themselves (kernels, grids, arguments and
// so every device address) makes a replay correct by construction: any
// change of pointer or size is a different key.
func (b *Backend) flush() {
	ls := b.rec.ls
	if len(ls) == 0 {
		return
	}
	defer func() { b.rec.ls, b.rec.gemm = b.rec.ls[:0], false }()
	if b.err != nil {
		return
	}
	b.queued++
	b.idle.flushBegin()
	defer b.idle.launched()
	if b.prof.on {
		b.runProfiled(ls)
		return
	}
	if b.graphs.on && len(ls) >= minGraphLaunches && !b.rec.gemm {
		g, key := b.graphs.lookup(ls)
		if g != nil {
			b.graphs.replays++
			b.fail(b.d.Call("cuGraphLaunch", b.d.GraphLaunch, g.exec, b.strm))
			return
		}
		if n := b.graphs.seen[key]; n == 1 {
			if err := b.capture(key, ls); err == nil {
				return
			} else {
				b.graphs.failed++
				b.graphs.lastErr = err
				b.graphs.seen[key] = 2 // do not try this one again
			}
		} else if n == 0 {
			b.graphs.seen[key] = 1
		}
	}
	b.graphs.direct += len(ls)
	for i := range ls {
		if err := b.run(&ls[i]); err != nil {
			b.fail(fmt.Errorf("launch %d of %d: %w", i, len(ls), err))
			return
		}
	}
}

const minGraphLaunches = 8

type graph struct {
	ls   []launch
	exec uintptr
	g    uintptr
}

// graphCache maps hashes of launch sequences to instantiated graphs.
type graphCache struct {
	on       bool
	seed     maphash.Seed
	m        map[uint64]*graph
	seen     map[uint64]uint8 // 1: seen once, 2: capture failed
	order    []uint64
	captures int
	replays  int
	direct   int
	failed   int
	lastErr  error
}

const maxGraphs = 64

// lookup finds the graph captured from launches equal to ls, or nil, and
// returns ls's key either way.
func (c *graphCache) lookup(ls []launch) (*graph, uint64) {
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&ls[0])), len(ls)*int(unsafe.Sizeof(ls[0])))
	key := maphash.Bytes(c.seed, raw)
	if g := c.m[key]; g != nil && slices.Equal(g.ls, ls) {
		return g, key
	}
	return nil, key
}

func (c *graphCache) init(on bool) {
	c.on, c.seed = on, maphash.MakeSeed()
	c.m, c.seen = map[uint64]*graph{}, map[uint64]uint8{}
}

func (c *graphCache) clear(b *Backend) {
	for _, g := range c.m {
		_ = b.d.Call("cuGraphExecDestroy", b.d.GraphExecDestroy, g.exec)
		_ = b.d.Call("cuGraphDestroy", b.d.GraphDestroy, g.g)
	}
	c.m, c.seen, c.order = map[uint64]*graph{}, map[uint64]uint8{}, nil
}

// Stream capture modes (CUstreamCaptureMode).
const captureRelaxed = 2

func (b *Backend) capture(key uint64, ls []launch) error {
	if err := b.d.Call("cuStreamBeginCapture", b.d.StreamBeginCapture, b.strm, captureRelaxed); err != nil {
		return err
	}
	var runErr error
	for i := range ls {
		if runErr = b.run(&ls[i]); runErr != nil {
			break
		}
	}
	g := &graph{ls: slices.Clone(ls)}
	if err := b.d.Call("cuStreamEndCapture", b.d.StreamEndCapture, b.strm, uintptr(unsafe.Pointer(&g.g))); err != nil || runErr != nil {
		if g.g != 0 {
			_ = b.d.Call("cuGraphDestroy", b.d.GraphDestroy, g.g)
		}
		if runErr != nil {
			return runErr
		}
		return err
	}
	if err := b.d.Call("cuGraphInstantiate", b.d.GraphInstantiate, uintptr(unsafe.Pointer(&g.exec)), g.g, 0); err != nil {
		_ = b.d.Call("cuGraphDestroy", b.d.GraphDestroy, g.g)
		return err
	}
	if len(b.graphs.order) >= maxGraphs {
		old := b.graphs.order[0]
		b.graphs.order = b.graphs.order[1:]
		if og := b.graphs.m[old]; og != nil {
			_ = b.d.Call("cuGraphExecDestroy", b.d.GraphExecDestroy, og.exec)
			_ = b.d.Call("cuGraphDestroy", b.d.GraphDestroy, og.g)
			delete(b.graphs.m, old)
		}
	}
	b.graphs.m[key] = g
	b.graphs.order = append(b.graphs.order, key)
	b.graphs.captures++
	return b.d.Call("cuGraphLaunch", b.d.GraphLaunch, g.exec, b.strm)
}

// GraphStats reports graph use since start: captures, replays, launches
// run directly, failed captures.
func (b *Backend) GraphStats() (captures, replays, direct, failed int, lastErr error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := &b.graphs
	return c.captures, c.replays, c.direct, c.failed, c.lastErr
}

// idleClock adds up the time the device sits idle waiting for the host:
// from a point where the stream has drained (a synchronous copy to the
// host, Sync) to the end of the next flush that launches work, split at
// BeginStep's start and end and the flush's start (backend.HostTime). In
// a decode loop that is the host's share of each step, which no kernel
// change can win back.
type idleClock struct {
	since, mark time.Time // since: the drain (zero: the device is busy); mark: the last split point
	t           backend.HostTime
}

func (c *idleClock) drained() {
	now := time.Now()
	c.since, c.mark = now, now
}

// split adds the time since the last split point to *d, while idle.
func (c *idleClock) split(d *time.Duration) {
	if c.since.IsZero() {
		return
	}
	now := time.Now()
	*d += now.Sub(c.mark)
	c.mark = now
}

func (c *idleClock) stepBegin()  { c.split(&c.t.Before) }
func (c *idleClock) stepBegun()  { c.split(&c.t.Inputs) }
func (c *idleClock) flushBegin() { c.split(&c.t.Record) }

// launched closes an idle period once the flush has launched its work.
func (c *idleClock) launched() {
	if c.since.IsZero() {
		return
	}
	c.split(&c.t.Launch)
	c.t.Total += c.mark.Sub(c.since)
	c.t.Gaps++
	c.since = time.Time{}
}

// DeviceIdle returns the host time spent while the device was idle
// (idleClock) since the last call, and starts counting afresh.
func (b *Backend) DeviceIdle() backend.HostTime {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.idle.t
	b.idle.t = backend.HostTime{}
	return t
}
