package cpu

import (
	"runtime"
	"sync/atomic"
)

// pool is a set of persistent worker goroutines. A decode step issues a
// few hundred small parallel ops (24 layers x 7 matmuls, attention, the
// LM head), each worth tens of microseconds; starting goroutines per op
// costs a wake-up of an idle OS thread each time (a futex and a
// scheduler round trip, several microseconds, more when the other core is
// busy), which is why the old code ran small matmuls on one core.
//
// Here helpers stay parked between steps and spin for a short while
// between the ops of a step: run publishes a job, helpers that are
// spinning see it within a few hundred nanoseconds, sleeping ones are
// woken through their channel. Tasks are claimed from an atomic counter,
// so a helper that starts late (its core busy with another process) just
// finds fewer tasks left, and the caller works too: a job never waits
// for a helper that has not started.
type pool struct {
	helpers []*helper
	cur     atomic.Pointer[job]
}

type helper struct {
	sleeping atomic.Bool
	wake     chan struct{}
}

// job is one parallel op: tasks 0..n-1 of f.
type job struct {
	f    func(task int)
	n    int64
	next atomic.Int64 // next task to claim
	done atomic.Int64 // tasks finished
}

// spinIters bounds how long an idle helper polls for the next job before
// it parks: about 50-100 us, longer than the gap between two ops of a
// step (norms, RoPE, residual adds run on the caller) and far shorter
// than the gap between requests, so an idle engine does not burn a core.
const spinIters = 1 << 15

func newPool(threads int) *pool {
	p := &pool{}
	for range threads - 1 {
		h := &helper{wake: make(chan struct{}, 1)}
		p.helpers = append(p.helpers, h)
		go p.loop(h)
	}
	return p
}

func (p *pool) loop(h *helper) {
	var last *job
	for {
		j := p.cur.Load()
		for i := 0; j == last && i < spinIters; i++ {
			if i&255 == 255 {
				// Let other goroutines of this process (the caller when
				// GOMAXPROCS is 1, the garbage collector) run.
				runtime.Gosched()
			}
			j = p.cur.Load()
		}
		if j == last {
			// Park. Announce it, then look once more: a job published
			// before the announcement was seen by no waker.
			h.sleeping.Store(true)
			if j = p.cur.Load(); j == last {
				<-h.wake
				continue
			}
			if !h.sleeping.CompareAndSwap(true, false) {
				// A waker claimed us and will send: take the token.
				<-h.wake
			}
		}
		last = j
		if j.n < 0 {
			return // closed
		}
		j.work()
	}
}

func (j *job) work() {
	for {
		t := j.next.Add(1) - 1
		if t >= j.n {
			return
		}
		j.f(int(t))
		j.done.Add(1)
	}
}

// close stops the helpers; the pool must not be used afterwards.
func (p *pool) close() {
	p.cur.Store(&job{n: -1})
	for _, h := range p.helpers {
		if h.sleeping.CompareAndSwap(true, false) {
			h.wake <- struct{}{}
		}
	}
}

// run calls f(0..n-1) on the pool and returns when all calls are done.
func (p *pool) run(n int, f func(task int)) {
	if n <= 0 {
		return
	}
	if n == 1 || len(p.helpers) == 0 {
		for t := range n {
			f(t)
		}
		return
	}
	j := &job{f: f, n: int64(n)}
	p.cur.Store(j)
	woken := 0
	for _, h := range p.helpers {
		if woken >= n-1 {
			break
		}
		if h.sleeping.CompareAndSwap(true, false) {
			h.wake <- struct{}{}
		}
		woken++
	}
	j.work()
	// Every task is claimed; wait for the ones still running elsewhere.
	for i := 0; j.done.Load() < j.n; i++ {
		if i&63 == 63 {
			runtime.Gosched()
		}
	}
}
