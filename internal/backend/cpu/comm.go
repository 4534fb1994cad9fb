package cpu

import (
	"fmt"
	"sync"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// NewGroup returns the collectives of n in-process ranks, one Comm per
// rank, each meant for the goroutine driving that rank's CPU backend. The
// ranks meet in memory: the last to arrive at a collective computes it
// for all, then wakes the others.
func NewGroup(n int) []backend.Comm {
	g := &group{n: n, bufs: make([]*Tensor, n), srcs: make([]*Tensor, n)}
	g.cond = sync.NewCond(&g.mu)
	out := make([]backend.Comm, n)
	for r := range out {
		out[r] = &comm{g: g, rank: r}
	}
	return out
}

type group struct {
	n       int
	mu      sync.Mutex
	cond    *sync.Cond
	arrived int
	gen     int // completed collectives, so a fast rank's next call cannot join this one
	bufs    []*Tensor
	srcs    []*Tensor
}

type comm struct {
	g    *group
	rank int
}

func (c *comm) Rank() int { return c.rank }
func (c *comm) Size() int { return c.g.n }

// meet records this rank's tensors and blocks until every rank has; the
// last one runs op while the others wait.
func (g *group) meet(rank int, dst, src *Tensor, op func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gen := g.gen
	g.bufs[rank], g.srcs[rank] = dst, src
	if g.arrived++; g.arrived < g.n {
		for gen == g.gen {
			g.cond.Wait()
		}
		return
	}
	op()
	g.arrived = 0
	g.gen++
	clear(g.bufs)
	clear(g.srcs)
	g.cond.Broadcast()
}

func (c *comm) AllReduce(t backend.Tensor) {
	x := t.(*Tensor)
	g := c.g
	g.meet(c.rank, x, nil, func() {
		sum := g.bufs[0].Data()
		for _, b := range g.bufs[1:] {
			if b.rows != x.rows || b.cols != x.cols {
				panic(fmt.Sprintf("cpu: all-reduce of [%d,%d] and [%d,%d]", x.rows, x.cols, b.rows, b.cols))
			}
			for i, v := range b.Data() {
				sum[i] += v
			}
		}
		for _, b := range g.bufs[1:] {
			copy(b.Data(), sum)
		}
	})
}

func (c *comm) AllGather(dst, src backend.Tensor) {
	g := c.g
	g.meet(c.rank, dst.(*Tensor), src.(*Tensor), func() {
		for _, d := range g.bufs {
			col := 0
			for _, s := range g.srcs {
				if s.rows != d.rows {
					panic(fmt.Sprintf("cpu: all-gather of %d rows into %d", s.rows, d.rows))
				}
				for r := range s.rows {
					copy(d.Row(r)[col:col+s.cols], s.Row(r))
				}
				col += s.cols
			}
			if col != d.cols {
				panic(fmt.Sprintf("cpu: all-gather of %d columns into %d", col, d.cols))
			}
		}
	})
}

// EmbedShard is Embed from a vocabulary shard starting at token lo;
// tokens outside it get zeros (backend.ShardEmbedder).
func (b *Backend) EmbedShard(dst backend.Tensor, table backend.Weight, lo int) {
	d, w := dst.(*Tensor), table.(*weight)
	n := w.shape[0]
	for r, id := range b.step.Tokens {
		i := int(id) - lo
		switch {
		case i < 0 || i >= n:
			clear(d.Row(r))
		case w.q != nil:
			w.q[0].DequantRow(d.Row(r), i)
		case w.fp != nil:
			w.fp[0].DequantRow(d.Row(r), i)
		default:
			copy(d.Row(r), w.dense[i*w.shape[1]:(i+1)*w.shape[1]])
		}
	}
}
