package cpu

import (
	"fmt"
	"math"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// kvStore keeps each layer's K and V as [block][slot][kvHead][headDim].
type kvStore struct {
	spec backend.KVSpec
	k, v [][]float32
}

func (s *kvStore) Spec() backend.KVSpec { return s.spec }

func (b *Backend) NewKVStore(spec backend.KVSpec) (backend.KVStore, error) {
	if spec.NumBlocks <= 0 || spec.BlockSize <= 0 {
		return nil, fmt.Errorf("cpu: KV store needs positive block count and size")
	}
	s := &kvStore{spec: spec}
	for _, l := range spec.Layers {
		n := spec.NumBlocks * spec.BlockSize * l.KVHeads * l.HeadDim
		s.k = append(s.k, make([]float32, n))
		s.v = append(s.v, make([]float32, n))
	}
	return s, nil
}

func (b *Backend) Attention(dst, q, k, v backend.Tensor, kv backend.KVStore, layer int, p backend.AttnParams) {
	st := kv.(*kvStore)
	out, qt, kt, vt := dst.(*Tensor), q.(*Tensor), k.(*Tensor), v.(*Tensor)
	bs := st.spec.BlockSize
	kvw := p.KVHeads * p.HeadDim
	K, V := st.k[layer], st.v[layer]
	step := b.step
	// Store this step's keys and values first: every query below may read
	// any earlier position of its own sequence.
	for _, s := range step.Seqs {
		for r := s.Start; r < s.Start+s.Len; r++ {
			pos := int(step.Positions[r])
			slot := int(s.Blocks[pos/bs])*bs + pos%bs
			copy(K[slot*kvw:(slot+1)*kvw], kt.Row(r))
			copy(V[slot*kvw:(slot+1)*kvw], vt.Row(r))
		}
	}
	seqOf := make([]int, qt.rows)
	for i, s := range step.Seqs {
		for r := s.Start; r < s.Start+s.Len; r++ {
			seqOf[r] = i
		}
	}
	group := p.Heads / p.KVHeads
	work := qt.rows * p.Heads
	// Each (token, head) item reads about pos*HeadDim keys and values;
	// split only when that adds up to enough work to pay for goroutines.
	perItem := (int(step.Positions[qt.rows-1]) + 1) * p.HeadDim
	b.parallel(work, max(1, (1<<16)/max(perItem, 1)), func(lo, hi int) {
		var scores []float32
		for w := lo; w < hi; w++ {
			r, h := w/p.Heads, w%p.Heads
			s := step.Seqs[seqOf[r]]
			pos := int(step.Positions[r])
			first := 0
			if p.Window > 0 && pos-p.Window+1 > 0 {
				first = pos - p.Window + 1
			}
			qv := qt.Row(r)[h*p.HeadDim : (h+1)*p.HeadDim]
			kvOff := (h / group) * p.HeadDim
			scores = scores[:0]
			maxS := float32(math.Inf(-1))
			for j := first; j <= pos; j++ {
				slot := int(s.Blocks[j/bs])*bs + j%bs
				sc := dot(qv, K[slot*kvw+kvOff:slot*kvw+kvOff+p.HeadDim]) * p.Scale
				if p.Softcap > 0 {
					sc = p.Softcap * float32(math.Tanh(float64(sc/p.Softcap)))
				}
				scores = append(scores, sc)
				maxS = max(maxS, sc)
			}
			var sum float32
			for i, sc := range scores {
				e := float32(math.Exp(float64(sc - maxS)))
				scores[i] = e
				sum += e
			}
			o := out.Row(r)[h*p.HeadDim : (h+1)*p.HeadDim]
			clear(o)
			for i, j := 0, first; j <= pos; i, j = i+1, j+1 {
				slot := int(s.Blocks[j/bs])*bs + j%bs
				wgt := scores[i] / sum
				vv := V[slot*kvw+kvOff : slot*kvw+kvOff+p.HeadDim]
				for d := range o {
					o[d] += wgt * vv[d]
				}
			}
		}
	})
}
