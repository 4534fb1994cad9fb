package server

import (
	"context"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/mlxcel/mlxcel/internal/model/modeltest"
)

// The Qwen3.5 hybrid fixture served: concurrent completions of the
// 130-token reference prompt (batched by the engine, each sequence with
// its own recurrent state) all continue with transformers' greedy ids.
func TestQwen35ServedGreedy(t *testing.T) {
	dir := fixture("qwen3_5_text-bf16")
	ref, err := modeltest.LoadReferenceFile(dir + "/reference_t130.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	l := loadModel(t, dir)
	want := l.Tokenizer.Decode(ref.GreedyIDs, false)
	s := startServer(t, l, Options{})
	c := s.client()
	ids := make([]int64, len(ref.InputIDs))
	for i, id := range ref.InputIDs {
		ids[i] = int64(id)
	}
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			resp, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
				Model:       "qwen3_5_text-bf16",
				Prompt:      openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: ids},
				MaxTokens:   openai.Int(int64(len(ref.GreedyIDs))),
				Temperature: openai.Float(0),
			}, option.WithJSONSet("ignore_eos", true))
			if err != nil {
				t.Error(err)
				return
			}
			if got := resp.Choices[0].Text; got != want {
				t.Errorf("request %d: %q, want the reference's %q", i, got, want)
			}
		})
	}
	wg.Wait()
}
