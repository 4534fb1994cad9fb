package server

import (
	"encoding/json"

	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/generate"
	"github.com/mlxcel/mlxcel/internal/sample"
)

// commonFields are the request fields chat and text completions share.
// Pointers tell "absent" from a zero value: an absent temperature takes
// the model's generation_config default, an explicit 0 is greedy.
//
// Unknown fields are ignored, as the OpenAI API and vLLM do, so clients
// that send newer fields keep working.
type commonFields struct {
	Model         string         `json:"model"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options"`
	N             *int           `json:"n"`
	MaxTokens     *int           `json:"max_tokens"`

	Temperature       *float64        `json:"temperature"`
	TopP              *float64        `json:"top_p"`
	TopK              *int            `json:"top_k"`
	MinP              *float64        `json:"min_p"`
	Seed              *int64          `json:"seed"`
	PresencePenalty   *float64        `json:"presence_penalty"`
	FrequencyPenalty  *float64        `json:"frequency_penalty"`
	RepetitionPenalty *float64        `json:"repetition_penalty"`
	Stop              json.RawMessage `json:"stop"`
	// IgnoreEOS is vLLM's extension: generate through EOS to max_tokens
	// (benchmarks, reference comparisons).
	IgnoreEOS bool `json:"ignore_eos"`
	// ReturnTokensAsTokenIDs (vLLM) names logprob tokens "token_id:<id>".
	ReturnTokensAsTokenIDs bool `json:"return_tokens_as_token_ids"`
	// LogitBias maps token ids (as strings) to -100..100 (logitbias.go).
	LogitBias json.RawMessage `json:"logit_bias"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

func (f *commonFields) includeUsage() bool {
	return f.StreamOptions != nil && f.StreamOptions.IncludeUsage
}

// check validates what does not depend on the prompt.
func (f *commonFields) check(m *served) *apiError {
	if f.Model != "" && f.Model != m.name {
		return modelNotFound(f.Model)
	}
	if f.N != nil && (*f.N < 1 || *f.N > maxChoices) {
		return badRequest("n", "n must be between 1 and %d, got n=%d.", maxChoices, *f.N)
	}
	if f.StreamOptions != nil && !f.Stream {
		return badRequest("stream_options", "stream_options is only allowed when stream is true.")
	}
	return nil
}

// params builds the sampling parameters: OpenAI defaults, overridden by
// the model's generation_config.json (as vLLM does by default), then by
// the request.
func (f *commonFields) params(m *served, topLogprobs int) (sample.Params, *apiError) {
	p := sample.DefaultParams()
	gc := m.loaded.GenConfig
	if gc.Temperature != nil {
		p.Temperature = float32(*gc.Temperature)
	}
	if gc.TopP != nil {
		p.TopP = float32(*gc.TopP)
	}
	if gc.TopK != nil {
		p.TopK = *gc.TopK
	}
	if gc.RepetitionPenalty != nil {
		p.RepetitionPenalty = float32(*gc.RepetitionPenalty)
	}
	setF := func(dst *float32, v *float64) {
		if v != nil {
			*dst = float32(*v)
		}
	}
	setF(&p.Temperature, f.Temperature)
	setF(&p.TopP, f.TopP)
	setF(&p.MinP, f.MinP)
	setF(&p.PresencePenalty, f.PresencePenalty)
	setF(&p.FrequencyPenalty, f.FrequencyPenalty)
	setF(&p.RepetitionPenalty, f.RepetitionPenalty)
	if f.TopK != nil {
		p.TopK = *f.TopK
	}
	if f.Seed != nil {
		s := uint64(*f.Seed)
		p.Seed = &s
	}
	p.Logprobs = topLogprobs
	bias, e := f.logitBias(m)
	if e != nil {
		return p, e
	}
	p.LogitBias = bias
	if err := p.Validate(); err != nil {
		return p, paramError(err)
	}
	return p, nil
}

// stops parses "stop": a string, an array of strings, or null.
func (f *commonFields) stops() ([]string, *apiError) {
	if len(f.Stop) == 0 || string(f.Stop) == "null" {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(f.Stop, &one); err == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(f.Stop, &many); err != nil {
		return nil, badRequest("stop", "'stop' must be a string or an array of strings.")
	}
	out := many[:0]
	for _, s := range many {
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// request assembles the generation request for prompt. promptParam names
// the prompt's field in errors; maxTokens is the effective max_tokens
// field (chat prefers max_completion_tokens).
func (f *commonFields) request(m *served, prompt []int32, promptParam string, maxTokens *int, topLogprobs int) (generate.Request, *apiError) {
	if len(prompt) == 0 {
		return generate.Request{}, badRequest(promptParam, "The prompt is empty.")
	}
	ctx := m.eng.MaxContext()
	mt := 0
	if maxTokens != nil {
		if *maxTokens <= 0 {
			return generate.Request{}, badRequest("max_tokens", "max_tokens must be at least 1, got %d.", *maxTokens)
		}
		mt = *maxTokens
	}
	if len(prompt) >= ctx {
		return generate.Request{}, badRequest(promptParam, "This model's maximum context length is %d tokens, but the prompt has %d tokens.", ctx, len(prompt))
	}
	if mt > ctx-len(prompt) { // not len+mt: max_tokens near 2^63 would overflow
		return generate.Request{}, badRequest("max_tokens",
			"This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the prompt, %d for the completion).",
			ctx, len(prompt)+mt, len(prompt), mt)
	}
	p, err := f.params(m, topLogprobs)
	if err != nil {
		return generate.Request{}, err
	}
	stops, err := f.stops()
	if err != nil {
		return generate.Request{}, err
	}
	return generate.Request{
		Request: engine.Request{
			Prompt:    prompt,
			Params:    p,
			MaxTokens: mt, // 0: up to the context length
			StopIDs:   m.stopIDs,
			IgnoreEOS: f.IgnoreEOS,
		},
		Stop: stops,
	}, nil
}
