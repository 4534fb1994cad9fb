package server

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/mlxcel/mlxcel/internal/sample"
)

// logitBias reads "logit_bias": {"token id": bias}, the ids as decimal
// strings (JSON object keys) within the vocabulary, the biases in
// -100..100 as OpenAI documents.
func (f *commonFields) logitBias(m *served) (map[int32]float32, *apiError) {
	if isNull(f.LogitBias) {
		return nil, nil
	}
	var raw map[string]float64
	if err := json.Unmarshal(f.LogitBias, &raw); err != nil {
		return nil, badRequest("logit_bias", "logit_bias must be an object mapping token ids to numbers between -100 and 100.")
	}
	if len(raw) == 0 {
		return nil, nil
	}
	bias := make(map[int32]float32, len(raw))
	for k, v := range raw {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil || id < 0 || int(id) >= m.vocab {
			return nil, badRequest("logit_bias", "logit_bias key %q is not a token id of this model (0 to %d).", k, m.vocab-1)
		}
		if math.IsNaN(v) || v < -sample.MaxLogitBias || v > sample.MaxLogitBias {
			return nil, badRequest("logit_bias", "logit_bias[%q] is %v; biases must be between -100 and 100.", k, v)
		}
		bias[int32(id)] = float32(v)
	}
	return bias, nil
}
