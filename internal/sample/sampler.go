package sample

import (
	"math"
	"math/rand/v2"
	"slices"
)

// TokenLogprob is one token and its log-probability.
type TokenLogprob struct {
	ID      int32
	Logprob float32
}

// Result is one sampled token.
type Result struct {
	ID int32
	// Logprob is the chosen token's log-softmax over the raw logits (see the
	// package comment). It is always filled, because the OpenAI API can ask
	// for it with top_logprobs = 0. Masked (-Inf) tokens read -Inf.
	Logprob float32
	// Top holds the Params.Logprobs (capped at the vocabulary size) most
	// likely tokens under the raw logits, most likely first, lower id first
	// on ties. It is freshly allocated (the caller may keep it) and nil when
	// Params.Logprobs is 0.
	Top []TokenLogprob
}

// samplingEps is vLLM's _SAMPLING_EPS: temperatures below it are greedy.
const samplingEps = 1e-5

// heapMaxK is the largest top-k served by the streaming heap; larger k use
// quickselect over a full candidate array (the heap's O(n log k) worst case
// loses to O(n) once k is large).
const heapMaxK = 1024

// Sampler samples tokens for one sequence. It owns its scratch buffers
// (sized to the vocabulary on first need and reused, so the per-token path
// does not allocate) and its random source. It is not safe for concurrent
// use; make one per sequence.
type Sampler struct {
	greedy bool
	invT   float64 // 1/temperature
	topK   int     // 0 = off
	topP   float64 // 1 = off
	minP   float32 // 0 = off
	rep    float32 // 1 = off
	freq   float32
	pres   float32
	nTop   int
	bias   map[int32]float32

	rng *rand.Rand
	// fixed and u are SampleWith's draw: when fixed, u replaces the
	// generator and the survivors are drawn in id order.
	fixed bool
	u     float64

	buf    []float32 // penalised logits, then probabilities in place
	counts []int32   // per-token output counts; all zero between calls
	cands  []cand    // candidate tokens for top-k / top-p
	hist   histogram
}

// New returns a sampler for logits of length vocab (longer logits are
// accepted later at the cost of one reallocation).
//
// New does not validate: call Params.Validate at the API boundary. It reads
// values Validate would reject as "off" where that is unambiguous, so the
// zero Params is plain greedy decoding: Temperature < 1e-5 (or NaN) is
// greedy, TopK <= 0 and TopP outside (0, 1) and MinP <= 0 are off,
// RepetitionPenalty <= 0 is off like 1, and Logprobs is clamped to [0, 20].
func New(p Params, vocab int) *Sampler {
	s := &Sampler{
		greedy: !(p.Temperature >= samplingEps),
		topK:   max(p.TopK, 0),
		topP:   1,
		rep:    1,
		freq:   p.FrequencyPenalty,
		pres:   p.PresencePenalty,
		nTop:   min(max(p.Logprobs, 0), MaxLogprobs),
		bias:   p.LogitBias,
	}
	if !s.greedy {
		s.invT = 1 / float64(p.Temperature)
	}
	if p.TopP > 0 && p.TopP < 1 {
		s.topP = float64(p.TopP)
	}
	if p.MinP > 0 {
		s.minP = min(p.MinP, 1)
	}
	if p.RepetitionPenalty > 0 && finite(p.RepetitionPenalty) {
		s.rep = p.RepetitionPenalty
	}
	if !finite(s.freq) {
		s.freq = 0
	}
	if !finite(s.pres) {
		s.pres = 0
	}
	var seed uint64
	if p.Seed != nil {
		seed = *p.Seed
	} else {
		seed = rand.Uint64()
	}
	// The second PCG word is a fixed odd constant: the seed alone decides
	// the stream, which is what "same seed, same output" needs.
	s.rng = rand.New(rand.NewPCG(seed, 0x9E3779B97F4A7C15))

	vocab = max(vocab, 0)
	if s.modifies() || !s.greedy {
		s.buf = make([]float32, vocab)
	}
	if s.penalised() {
		s.counts = make([]int32, vocab)
	}
	return s
}

func (s *Sampler) penalised() bool {
	return s.rep != 1 || s.freq != 0 || s.pres != 0
}

// modifies reports whether sampling works on a modified copy of the
// logits (penalties or a logit bias).
func (s *Sampler) modifies() bool { return s.penalised() || len(s.bias) > 0 }

// applyBias adds the logit bias.
func (s *Sampler) applyBias(l []float32) {
	for id, b := range s.bias {
		if id >= 0 && int(id) < len(l) {
			l[id] += b
		}
	}
}

// Greedy returns the index of the largest logit, the lowest index on ties.
// NaN entries are skipped; if no entry is larger than -Inf it returns 0.
//
// It finds the max value with four independent running maxima (no
// loop-carried index, so the compares pipeline; ~2x faster than the
// one-pass argmax) and then the first index holding it, which is usually
// an early exit.
func Greedy(logits []float32) int32 {
	m0, m1, m2, m3 := negInf, negInf, negInf, negInf
	i := 0
	for ; i+4 <= len(logits); i += 4 {
		v := logits[i : i+4 : i+4]
		if v[0] > m0 {
			m0 = v[0]
		}
		if v[1] > m1 {
			m1 = v[1]
		}
		if v[2] > m2 {
			m2 = v[2]
		}
		if v[3] > m3 {
			m3 = v[3]
		}
	}
	for ; i < len(logits); i++ {
		if logits[i] > m0 {
			m0 = logits[i]
		}
	}
	m := max(m0, m1, m2, m3) // no NaN can be in here
	if m == negInf {
		return 0
	}
	for i, v := range logits {
		if v == m {
			return int32(i)
		}
	}
	return 0 // unreachable
}

// Sample picks the next token from logits (one entry per vocabulary id).
// prompt and generated are the sequence so far; they only feed the
// penalties and are read, never kept. Token ids outside [0, len(logits))
// are ignored. Sample never modifies logits: penalties are applied to a
// private copy, and only when some penalty is on. It panics on empty logits.
func (s *Sampler) Sample(logits []float32, prompt, generated []int32) Result {
	s.fixed = false
	return s.sample(logits, prompt, generated)
}

// SampleWith is Sample with the uniform draw u in [0, 1) given instead of
// taken from the sampler's generator, and the survivors of the filters
// walked in token-id order for the inverse-CDF draw: the canonical rule
// that the device sampler follows too (backend.RowSampler), so that the
// same u picks the same token on the host and on the device, whatever
// order a selection left the candidates in. With Uniform(seed, position)
// as u, a draw depends on nothing but the request.
func (s *Sampler) SampleWith(logits []float32, prompt, generated []int32, u float64) Result {
	s.fixed, s.u = true, u
	return s.sample(logits, prompt, generated)
}

// draw is the uniform of this call.
func (s *Sampler) draw() float64 {
	if s.fixed {
		return s.u
	}
	return s.rng.Float64()
}

func (s *Sampler) sample(logits []float32, prompt, generated []int32) Result {
	n := len(logits)
	if n == 0 {
		panic("sample: empty logits")
	}
	s.grow(n)

	l := logits
	if s.modifies() {
		l = s.buf[:n]
		copy(l, logits)
		s.applyBias(l)
		if s.penalised() {
			s.applyPenalties(l, prompt, generated)
		}
	}

	mi := Greedy(l)
	id := mi
	rawMax, rawLSE, haveLSE := int32(-1), 0.0, false
	if !s.modifies() {
		rawMax = mi // l is logits
	}
	if !s.greedy {
		var z float64
		var full bool
		id, z, full = s.sampleTempered(l, l[mi])
		// When nothing changed the logits (no penalties, temperature 1) and
		// the exp pass covered the whole vocabulary, its sum is exactly the
		// raw partition function: skip the second exp pass.
		if full && !s.modifies() && s.invT == 1 {
			rawLSE, haveLSE = float64(l[mi])+math.Log(z), true
		}
	}
	return s.result(id, logits, rawMax, rawLSE, haveLSE)
}

// grow makes the scratch buffers cover n tokens. It allocates only when a
// longer logits vector than ever before arrives.
func (s *Sampler) grow(n int) {
	if (s.modifies() || !s.greedy) && len(s.buf) < n {
		s.buf = make([]float32, n)
	}
	if s.penalised() && len(s.counts) < n {
		// The old counts are all zero between calls, nothing to carry over.
		s.counts = make([]int32, n)
	}
}

// applyPenalties applies, in vLLM's order, the repetition penalty to every
// token present in prompt or generated (once per distinct token), then
// logit -= frequency*count and logit -= presence to tokens in generated.
func (s *Sampler) applyPenalties(l []float32, prompt, generated []int32) {
	n := uint32(len(l))
	cnt := s.counts[:n]
	for _, t := range generated {
		if uint32(t) < n {
			cnt[t]++
		}
	}
	// counts[t] == -1 marks "already penalised" so repeated ids are
	// handled once without a separate seen-set.
	visit := func(ids []int32) {
		for _, t := range ids {
			if uint32(t) >= n || cnt[t] < 0 {
				continue
			}
			v := l[t]
			if s.rep != 1 {
				if v > 0 {
					v /= s.rep
				} else {
					v *= s.rep
				}
			}
			if c := cnt[t]; c > 0 {
				v -= s.freq * float32(c)
				v -= s.pres
			}
			l[t] = v
			cnt[t] = -1
		}
	}
	if s.rep != 1 {
		visit(prompt)
	}
	visit(generated)
	// Leave counts all zero for the next call.
	for _, t := range prompt {
		if uint32(t) < n {
			cnt[t] = 0
		}
	}
	for _, t := range generated {
		if uint32(t) < n {
			cnt[t] = 0
		}
	}
}

// sampleTempered draws from softmax(l/T) restricted by top-k, top-p and
// min-p; m is max(l). It returns the token and, when full is true, the sum
// over the whole vocabulary of exp((l-m)/T).
func (s *Sampler) sampleTempered(l []float32, m float32) (id int32, z float64, full bool) {
	n := len(l)
	if math.IsInf(float64(m), 0) || m != m {
		// Everything masked (-Inf/NaN), or +Inf logits: there is no
		// distribution to sample; fall back to the argmax.
		return Greedy(l), 0, false
	}
	k := s.topK
	if k >= n {
		k = 0
	}
	if k > 0 {
		return s.sampleTopK(l, m, k), 0, false
	}

	probs := s.buf[:n] // may alias l: expStore reads l[i] before writing it
	if s.topP < 1 {
		clear(s.hist[:])
		z = expStoreHist(probs, l, m, s.invT, &s.hist)
		target := s.topP * z
		// Find the first bucket where the mass from the top reaches the
		// target: only tokens up to that bucket can be in the nucleus.
		stop, acc := uint32(nBuckets-1), 0.0
		for b := range nBuckets {
			acc += s.hist.mass(b)
			if acc >= target {
				stop = uint32(b)
				break
			}
		}
		c := s.cands[:0]
		for i, e := range probs {
			if bucketOf(e) <= stop {
				c = append(c, cand{e, int32(i)})
			}
		}
		s.cands = c
		c = c[:topPPrefix(c, target)]
		return s.pickCands(c, probs), z, true
	}
	// Without top-p, min-p is a fixed threshold on e = p/p_max (the top
	// token has e = exp(0) = 1 exactly), applied while exponentiating.
	z = expStore(probs, l, m, s.invT, s.minP)
	return s.pickDense(probs, z), z, s.minP == 0
}

// sampleTopK handles top-k (then top-p and min-p) when k < len(l). Only the
// k survivors are exponentiated.
func (s *Sampler) sampleTopK(l []float32, m float32, k int) int32 {
	var c []cand
	if k <= heapMaxK {
		c = heapTopK(s.candBuf(k), l, k)
	} else {
		c = s.candBuf(len(l))
		for i, v := range l {
			c[i] = cand{noNaN(v), int32(i)}
		}
		selectTopK(c, k)
		c = c[:k]
	}
	z := 0.0
	for i := range c {
		e := expNeg((float64(c[i].v) - float64(m)) * s.invT)
		c[i].v = e
		z += float64(e)
	}
	if s.topP < 1 {
		c = c[:topPPrefix(c, s.topP*z)]
	}
	return s.pickCands(c, nil)
}

func (s *Sampler) candBuf(n int) []cand {
	if cap(s.cands) < n {
		s.cands = make([]cand, n)
	}
	return s.cands[:n]
}

// pickCands applies min-p to the survivors of top-k/top-p and draws one of
// them in proportion to its weight. The survivors are in no particular
// order, but a deterministic one, so seeded runs repeat.
//
// With SampleWith's draw the survivors are walked in id order: sorted
// when few, else (dense, the vocabulary-long buffer the probabilities
// were in, no longer needed) spread back over a zeroed dense row and
// drawn by pickDense, O(vocab) instead of a sort of a flat nucleus.
func (s *Sampler) pickCands(c []cand, dense []float32) int32 {
	if s.minP > 0 {
		// min-p compares to the top survivor, whose e is exactly 1 because
		// the argmax always survives top-k and top-p.
		kept := c[:0]
		for _, x := range c {
			if x.v >= s.minP {
				kept = append(kept, x)
			}
		}
		c = kept
	}
	if s.fixed && dense != nil && len(c) > 256 {
		clear(dense)
		mass := 0.0
		for _, x := range c {
			dense[x.id] = x.v
			mass += float64(x.v)
		}
		return s.pickDense(dense, mass)
	}
	if s.fixed {
		slices.SortFunc(c, func(a, b cand) int { return int(a.id) - int(b.id) })
	}
	mass := 0.0
	for _, x := range c {
		mass += float64(x.v)
	}
	u := s.draw() * mass
	acc, last := 0.0, int32(-1)
	for _, x := range c {
		if x.v > 0 {
			acc += float64(x.v)
			last = x.id
			if acc > u {
				return x.id
			}
		}
	}
	if last < 0 { // no positive weight: cannot happen with a finite max
		return c[0].id
	}
	return last // u rounded up to mass
}

// pickDense draws an index in proportion to probs (which sum to mass). The
// strict "acc > u" never selects a zero-weight entry.
func (s *Sampler) pickDense(probs []float32, mass float64) int32 {
	u := s.draw() * mass
	acc, last := 0.0, -1
	for i, e := range probs {
		if e > 0 {
			acc += float64(e)
			last = i
			if acc > u {
				return int32(i)
			}
		}
	}
	if last < 0 {
		return Greedy(probs)
	}
	return int32(last)
}

// result fills in the raw logprobs for token id. rawMax is the argmax of
// logits when the caller already knows it (-1 otherwise); lse is the raw
// log-sum-exp when haveLSE.
func (s *Sampler) result(id int32, logits []float32, rawMax int32, lse float64, haveLSE bool) Result {
	if !haveLSE {
		if rawMax < 0 {
			rawMax = Greedy(logits)
		}
		m := logits[rawMax]
		lse = float64(m)
		if !math.IsInf(lse, 0) && m == m {
			lse += math.Log(expSum(logits, m))
		}
	}
	res := Result{ID: id, Logprob: logprob(logits[id], lse)}
	if k := min(s.nTop, len(logits)); k > 0 {
		var tmp [MaxLogprobs]cand
		top := heapTopK(tmp[:k], logits, k)
		slices.SortFunc(top, cmpRank)
		res.Top = make([]TokenLogprob, k)
		for i, c := range top {
			res.Top[i] = TokenLogprob{ID: c.id, Logprob: logprob(c.v, lse)}
		}
	}
	return res
}

// logprob is v - lse in float64. When the max logit is infinite (lse is
// ±Inf) the distribution is degenerate: the max tokens get 0, others -Inf.
func logprob(v float32, lse float64) float32 {
	if v != v {
		return negInf
	}
	if math.IsInf(lse, 0) {
		if float64(v) == lse {
			return 0
		}
		return negInf
	}
	return float32(float64(v) - lse)
}
