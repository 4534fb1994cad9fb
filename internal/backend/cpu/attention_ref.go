package cpu

import (
	"github.com/mlxcel/mlxcel/internal/backend/cpu/qmat"
	"math"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// attentionRef is the plain attention loop: for each (token, head), a dot
// with every key, a softmax, a weighted sum of values. It runs where the
// kernels of attention.go do not (no AVX2, a head dim that is not a
// multiple of 8) and is what the tests compare them with. The step's keys
// and values are already stored.
func (b *Backend) attentionRef(out, qt *Tensor, st *kvStore, layer int, p backend.AttnParams, seqOf []int) {
	kvw := p.KVHeads * p.HeadDim
	K, V := &st.k[layer], &st.v[layer]
	step := b.step
	group := p.Heads / p.KVHeads
	work := qt.rows * p.Heads
	// Each (token, head) item reads about min(pos+1, window)*HeadDim keys
	// and values; split only when that adds up to enough work to pay for
	// the hand-off.
	keys := int(step.Positions[qt.rows-1]) + 1
	if p.Window > 0 {
		keys = min(keys, p.Window)
	}
	perItem := keys * p.HeadDim
	sinks := sinkLogits(p)
	b.parallel(work, max(1, (1<<16)/max(perItem, 1)), func(lo, hi int) {
		var scores []float32
		var tmp []float32 // a decoded K or V row; float32 is read in place
		if K.f32 == nil {
			tmp = make([]float32, p.HeadDim)
		}
		// rows[i] is the store row of the i-th key of token rowsOf; all
		// heads of a token (consecutive items) share it.
		var rows []int
		rowsOf := -1
		for w := lo; w < hi; w++ {
			r, h := w/p.Heads, w%p.Heads
			if r != rowsOf {
				pos := int(step.Positions[r])
				first := 0
				if p.Window > 0 && pos-p.Window+1 > 0 {
					first = pos - p.Window + 1
				}
				rows = st.rows(rows[:0], layer, &step.Seqs[seqOf[r]], first, pos)
				rowsOf = r
			}
			qv := qt.Row(r)[h*p.HeadDim : (h+1)*p.HeadDim]
			kvOff := (h / group) * p.HeadDim
			scores = scores[:0]
			maxS := float32(math.Inf(-1))
			for _, row := range rows {
				sc := qmat.Dot(qv, K.at(tmp, row*kvw+kvOff, p.HeadDim)) * p.Scale
				if p.Softcap > 0 {
					sc = p.Softcap * float32(math.Tanh(float64(sc/p.Softcap)))
				}
				scores = append(scores, sc)
				maxS = max(maxS, sc)
			}
			var sink float64 // exp(sink - max): the sink's softmax column
			if sinks != nil {
				maxS = max(maxS, sinks[h])
				sink = math.Exp(float64(sinks[h] - maxS))
			}
			sum := float32(sink)
			for i, sc := range scores {
				e := float32(math.Exp(float64(sc - maxS)))
				scores[i] = e
				sum += e
			}
			o := out.Row(r)[h*p.HeadDim : (h+1)*p.HeadDim]
			clear(o)
			for i, row := range rows {
				wgt := scores[i] / sum
				vv := V.at(tmp, row*kvw+kvOff, p.HeadDim)
				for d := range o {
					o[d] += wgt * vv[d]
				}
			}
		}
	})
}
