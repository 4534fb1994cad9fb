// Package sample turns a vector of next-token logits into a token, the way
// vLLM, llama.cpp and Hugging Face transformers define their sampling knobs.
//
// Processing order follows vLLM:
//
//  1. penalties on the logits: repetition (HF rule, prompt + output tokens),
//     then frequency, then presence (OpenAI rule, output tokens only);
//  2. temperature (Temperature < 1e-5 means greedy, like vLLM's
//     _SAMPLING_EPS; greedy still sees the penalised logits);
//  3. top-k, then top-p on the top-k renormalised distribution, then min-p
//     relative to the most probable surviving token;
//  4. one draw from the renormalised survivors.
//
// Ranks order tokens by value, the lower id first on ties. Sample draws
// from the sampler's own generator; SampleWith takes the uniform and walks
// the survivors in id order (inverse CDF), the canonical rule that the
// engine and the device samplers use with u = Uniform(seed, position), a
// Philox4x32-10 draw (philox.go), so that a seeded request samples the
// same tokens whatever it is batched with and on whichever backend.
//
// Logprobs reported in Result are the log-softmax of the RAW logits the
// caller passed in: before penalties, temperature and filters. That is what
// the OpenAI API and vLLM (logprobs_mode "raw_logprobs", the default)
// return, and it makes the numbers a property of the model rather than of the
// request's sampling knobs.
package sample

import (
	"fmt"
	"math"
)

// Params are the per-request sampling knobs. The zero value is greedy
// decoding with every filter and penalty off (see New for how zero and
// "off" values are read); DefaultParams gives the OpenAI defaults.
type Params struct {
	// Temperature divides the logits. 0 (or anything below 1e-5) is greedy.
	Temperature float32
	// TopK keeps the K most likely tokens. 0 or -1 turns it off.
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability
	// reaches TopP. 1 turns it off.
	TopP float32
	// MinP drops tokens whose probability is below MinP times the
	// probability of the most likely token. 0 turns it off.
	MinP float32
	// RepetitionPenalty is the HF/CTRL penalty over tokens seen in the
	// prompt or the output: logit > 0 ? logit/p : logit*p. 1 turns it off.
	RepetitionPenalty float32
	// PresencePenalty and FrequencyPenalty follow OpenAI over generated
	// tokens only: logit -= frequency*count + presence*[count > 0].
	PresencePenalty  float32
	FrequencyPenalty float32
	// Seed makes sampling reproducible: the same seed, logits and params give
	// the same tokens. nil draws a random seed.
	Seed *uint64
	// Logprobs is how many top alternatives to return per token (0..20).
	// The chosen token's logprob is always returned in Result.Logprob.
	Logprobs int
	// LogitBias is added to the logits of its token ids (OpenAI's
	// logit_bias, -100..100) before penalties and temperature; ids beyond
	// the vocabulary are ignored. Reported logprobs stay raw.
	LogitBias map[int32]float32
}

// DefaultParams returns the OpenAI API defaults: temperature 1, no filters,
// no penalties, no logprobs, random seed.
func DefaultParams() Params {
	return Params{Temperature: 1, TopP: 1, RepetitionPenalty: 1}
}

// Limits accepted by Validate. They match what the OpenAI API documents and
// what vLLM's SamplingParams accepts, so a request that one of them would
// accept is not rejected here.
const (
	MaxTemperature = 2
	MaxPenalty     = 2 // presence and frequency: [-2, 2]
	MaxLogprobs    = 20
	MaxLogitBias   = 100
)

// ParamError reports one out-of-range parameter. Param is the OpenAI/vLLM
// JSON name of the field so that an HTTP layer can fill the "param" member
// of an OpenAI error body and answer 400.
type ParamError struct {
	Param string
	Msg   string
}

func (e *ParamError) Error() string { return e.Param + " " + e.Msg }

func paramErr(param, format string, args ...any) error {
	return &ParamError{Param: param, Msg: fmt.Sprintf(format, args...)}
}

func finite(x float32) bool {
	return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0)
}

// Validate checks the ranges the OpenAI API (and vLLM) accept and returns a
// *ParamError for the first field out of range, in declaration order.
// Note that TopP and RepetitionPenalty must be set explicitly (1 = off):
// their zero values are out of range, as they are for the APIs.
func (p Params) Validate() error {
	if !finite(p.Temperature) || p.Temperature < 0 || p.Temperature > MaxTemperature {
		return paramErr("temperature", "must be between 0 and %d, got %v", MaxTemperature, p.Temperature)
	}
	if p.TopK < -1 {
		return paramErr("top_k", "must be -1 or 0 (disabled) or at least 1, got %d", p.TopK)
	}
	if !finite(p.TopP) || p.TopP <= 0 || p.TopP > 1 {
		return paramErr("top_p", "must be in (0, 1], got %v", p.TopP)
	}
	if !finite(p.MinP) || p.MinP < 0 || p.MinP > 1 {
		return paramErr("min_p", "must be in [0, 1], got %v", p.MinP)
	}
	if !finite(p.RepetitionPenalty) || p.RepetitionPenalty <= 0 {
		return paramErr("repetition_penalty", "must be greater than 0, got %v", p.RepetitionPenalty)
	}
	if !finite(p.PresencePenalty) || p.PresencePenalty < -MaxPenalty || p.PresencePenalty > MaxPenalty {
		return paramErr("presence_penalty", "must be between -%d and %d, got %v", MaxPenalty, MaxPenalty, p.PresencePenalty)
	}
	if !finite(p.FrequencyPenalty) || p.FrequencyPenalty < -MaxPenalty || p.FrequencyPenalty > MaxPenalty {
		return paramErr("frequency_penalty", "must be between -%d and %d, got %v", MaxPenalty, MaxPenalty, p.FrequencyPenalty)
	}
	for id, b := range p.LogitBias {
		if id < 0 || !finite(b) || b < -MaxLogitBias || b > MaxLogitBias {
			return paramErr("logit_bias", "must map token ids to values between -%d and %d, got %d: %v", MaxLogitBias, MaxLogitBias, id, b)
		}
	}
	if p.Logprobs < 0 || p.Logprobs > MaxLogprobs {
		return paramErr("top_logprobs", "must be between 0 and %d, got %d", MaxLogprobs, p.Logprobs)
	}
	return nil
}
