//go:build linux

package cuda

import (
	"fmt"
	"unsafe"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// Asynchronous steps. A decode step's host work (the batch upload,
// recording ~230-390 launches, matching and launching the graph) took
// 110-210 us a step on the H200 machine's host while the device waited
// (DeviceIdle, s8r1): 5-7% of a step. Nothing in that work needs the
// previous step's result except the token id, so:
//
//   - BeginStep uploads the batch with an asynchronous copy from a pinned
//     slot, ordered on the stream behind the previous step, instead of a
//     synchronous copy that waited for the device to drain;
//   - ArgmaxAsync writes the ids into one device buffer (feed) and queues
//     their copy to a pinned slot, marked by an event;
//   - SampleRowsAsync does the same for a sampled step: sample_rows writes
//     the ids into feed too, and its ids and logprobs take the same queued
//     copy (queueCopy);
//   - a token given as backend.FeedToken(j) is read by the embedding
//     kernel from feed[j], so step N+1 can be queued before step N's id
//     reaches the host.
//
// A greedy decode loop then keeps one step queued behind the running one
// (Model.ForwardArgmaxAsync) and the host's work overlaps the device's.

// pinnedSlot is page-locked host memory for asynchronous copies; ev marks
// the last copy queued on it, so the slot is reused only after that copy ran.
type pinnedSlot struct {
	buf  []byte
	ev   uintptr
	used bool // a copy was queued since the last wait on ev
}

// eventDisableTiming is CU_EVENT_DISABLE_TIMING: the cheapest event.
const eventDisableTiming = 2

// ready waits for the slot's last copy and makes it at least n bytes.
func (b *Backend) ready(s *pinnedSlot, n int) error {
	if s.used {
		s.used = false
		if err := b.d.Call("cuEventSynchronize", b.d.EventSynchronize, s.ev); err != nil {
			return err
		}
	}
	if s.ev == 0 {
		if err := b.d.Call("cuEventCreate", b.d.EventCreate, uintptr(unsafe.Pointer(&s.ev)), eventDisableTiming); err != nil {
			return err
		}
	}
	if len(s.buf) >= n {
		return nil
	}
	b.freeSlot(s, false)
	n = max(n, 4<<10)
	var hp *byte // a C address in a *byte, as htod's staging
	if err := b.d.Call("cuMemAllocHost", b.d.MemAllocHost, uintptr(unsafe.Pointer(&hp)), uintptr(n)); err != nil {
		return err
	}
	s.buf = unsafe.Slice(hp, n)
	return nil
}

// marked records the slot's event behind the copy just queued.
func (b *Backend) marked(s *pinnedSlot) error {
	s.used = true
	b.queued++
	return b.d.Call("cuEventRecord", b.d.EventRecord, s.ev, b.strm)
}

func (b *Backend) freeSlot(s *pinnedSlot, event bool) {
	if len(s.buf) > 0 {
		_ = b.d.Call("cuMemFreeHost", b.d.MemFreeHost, uintptr(unsafe.Pointer(&s.buf[0])))
		s.buf = nil
	}
	if event && s.ev != 0 {
		_ = b.d.Call("cuEventDestroy", b.d.EventDestroy, s.ev)
		s.ev = 0
	}
}

// uploadAsync queues a copy of src to dst on the stream, behind the work
// already queued there (so kernels still reading dst finish first).
func (b *Backend) uploadAsync(dst uintptr, src []int32) error {
	s := &b.inSlots[b.nextIn]
	b.nextIn = (b.nextIn + 1) % len(b.inSlots)
	return b.uploadVia(s, dst, src)
}

// uploadVia is uploadAsync through the pinned slot s.
func (b *Backend) uploadVia(s *pinnedSlot, dst uintptr, src []int32) error {
	n := 4 * len(src)
	if err := b.ready(s, n); err != nil {
		return err
	}
	copy(s.buf, unsafe.Slice((*byte)(unsafe.Pointer(&src[0])), n))
	if err := b.d.Call("cuMemcpyHtoDAsync", b.d.MemcpyHtoDAsync, dst, uintptr(unsafe.Pointer(&s.buf[0])), uintptr(n), b.strm); err != nil {
		return err
	}
	return b.marked(s)
}

// checkFeed rejects FeedTokens that name no row of the last argmax.
func (b *Backend) checkFeed(tokens []int32) error {
	for _, id := range tokens {
		if j, fed := backend.FedRow(id); fed && j >= b.feedRows {
			return fmt.Errorf("cuda: feed token for argmax row %d, but the last argmax had %d rows", j, b.feedRows)
		}
	}
	return nil
}

// idSlot receives one queued copy of a step's results (an argmax's ids,
// a sampling's ids and logprobs); p is that copy until collected.
type idSlot struct {
	pinnedSlot
	p *pendingCopy
}

// pendingCopy is n words of results on their way to the host: the part
// of a queued argmax or sampling (backend.PendingIDs, PendingSamples)
// that both share.
type pendingCopy struct {
	b     *Backend
	slot  *idSlot
	n     int
	seq   uint64 // b.queued right after its copy: equal at collection means nothing runs behind it
	words []int32
	err   error
	done  bool
}

// wait returns the words, and the first failure since the last Sync.
func (p *pendingCopy) wait() ([]int32, error) {
	b := p.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if !p.done {
		defer b.bind()()
		b.collect(p)
	}
	err := p.err
	if err == nil {
		err, b.err = b.err, nil
	}
	return p.words, err
}

// collect waits for p's copy and moves its words off the pinned slot.
func (b *Backend) collect(p *pendingCopy) {
	s := p.slot
	p.err = b.d.Call("cuEventSynchronize", b.d.EventSynchronize, s.ev)
	s.used, s.p, p.done = false, nil, true
	p.words = make([]int32, p.n)
	copy(p.words, unsafe.Slice((*int32)(unsafe.Pointer(&s.buf[0])), p.n))
	if p.seq == b.queued {
		b.idle.drained() // nothing was queued behind it: the device waits from here
	}
}

// queueCopy flushes what was recorded and queues a copy of n words at src
// to the next pinned id slot, behind it on the stream. A failure so far
// (sticky b.err) is the pending copy's. Call with mu held and the context
// bound.
func (b *Backend) queueCopy(src uintptr, n int) *pendingCopy {
	b.flush()
	p := &pendingCopy{b: b, n: n, words: []int32{}, done: true}
	if b.err != nil {
		p.err, b.err = b.err, nil
		return p
	}
	s := &b.idSlots[b.nextID]
	b.nextID = (b.nextID + 1) % len(b.idSlots)
	if s.p != nil {
		b.collect(s.p) // a copy nobody waited for yet: its words move to its pendingCopy
	}
	err := b.ready(&s.pinnedSlot, 4*n)
	if err == nil {
		err = b.d.Call("cuMemcpyDtoHAsync", b.d.MemcpyDtoHAsync, uintptr(unsafe.Pointer(&s.buf[0])), src, uintptr(4*n), b.strm)
	}
	if err == nil {
		err = b.marked(&s.pinnedSlot)
	}
	if err != nil {
		p.err = err
		return p
	}
	p.slot, p.seq, p.done, p.words = s, b.queued, false, nil
	s.p = p
	return p
}

// pendingIDs is a queued argmax (backend.PendingIDs).
type pendingIDs struct{ *pendingCopy }

// Wait returns the ids, and the first failure since the last Sync.
func (p pendingIDs) Wait() ([]int32, error) { return p.wait() }

// ArgmaxAsync queues the argmax of each row of x (backend.AsyncArgmaxer).
func (b *Backend) ArgmaxAsync(x backend.Tensor) backend.PendingIDs {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.tt(x)
	if t.rows == 0 {
		return pendingIDs{&pendingCopy{b: b, words: []int32{}, done: true}}
	}
	defer b.bind()()
	if err := b.argmaxInto(t); err != nil {
		b.fail(err)
	}
	p := b.queueCopy(b.feed.ptr, t.rows)
	if p.err == nil {
		b.feedRows = t.rows
	}
	return pendingIDs{p}
}

// Argmax runs ArgmaxAsync and waits. A failure stays for Sync to report.
func (b *Backend) Argmax(x backend.Tensor) []int32 {
	ids, err := b.ArgmaxAsync(x).Wait()
	if err != nil {
		b.mu.Lock()
		b.fail(err)
		b.mu.Unlock()
		return make([]int32, b.tt(x).rows)
	}
	return ids
}

// closeAsync frees the pinned slots and their events (Close).
func (b *Backend) closeAsync() {
	for i := range b.inSlots {
		b.freeSlot(&b.inSlots[i], true)
	}
	for i := range b.idSlots {
		b.freeSlot(&b.idSlots[i].pinnedSlot, true)
	}
	for i := range b.sampleIn {
		b.freeSlot(&b.sampleIn[i], true)
	}
}
