package server

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/mlxcel/mlxcel/internal/model/modeltest"
)

// The official OpenAI Go SDK is the client in these tests: if it can
// parse what the server sends, real clients can.

func TestSDKChat(t *testing.T) {
	s := startServer(t, loadModel(t, ""), Options{})
	c := s.client()
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:       "stories260k",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Once upon a time")},
		MaxTokens:   openai.Int(20),
		Temperature: openai.Float(0),
	}
	resp, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 1 || resp.Choices[0].Message.Content == "" {
		t.Fatalf("choices %+v", resp.Choices)
	}
	if resp.Choices[0].FinishReason != "length" || resp.Usage.CompletionTokens != 20 || resp.Usage.PromptTokens == 0 ||
		resp.Usage.TotalTokens != resp.Usage.PromptTokens+20 {
		t.Errorf("finish %q usage %+v", resp.Choices[0].FinishReason, resp.Usage)
	}
	var tm timings
	if err := json.Unmarshal([]byte(resp.JSON.ExtraFields["timings"].Raw()), &tm); err != nil {
		t.Fatalf("timings: %v", err)
	}
	if tm.PredictedN != 20 || tm.PromptN != int(resp.Usage.PromptTokens) || tm.TTFTMS <= 0 || tm.PredictedPerSecond <= 0 || tm.PromptPerSecond <= 0 {
		t.Errorf("timings %+v", tm)
	}
	want := resp.Choices[0].Message.Content

	// Streaming, with usage: the same greedy text, assembled from deltas.
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if chunks < 3 {
		t.Errorf("only %d chunks", chunks)
	}
	if got := acc.Choices[0].Message.Content; got != want {
		t.Errorf("streamed %q, non-streamed %q", got, want)
	}
	if acc.Choices[0].FinishReason != "length" || acc.Usage.CompletionTokens != 20 {
		t.Errorf("stream finish %q usage %+v", acc.Choices[0].FinishReason, acc.Usage)
	}

	// Chat logprobs: one entry per generated token, top alternatives
	// most likely first, the greedy choice the most likely.
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
	params.Logprobs = openai.Bool(true)
	params.TopLogprobs = openai.Int(3)
	resp, err = c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	lps := resp.Choices[0].Logprobs.Content
	if len(lps) != 20 {
		t.Fatalf("%d logprob entries", len(lps))
	}
	var joined strings.Builder
	for i, lp := range lps {
		joined.WriteString(lp.Token)
		if len(lp.TopLogprobs) != 3 || lp.TopLogprobs[0].Token != lp.Token || lp.TopLogprobs[0].Logprob != lp.Logprob ||
			lp.TopLogprobs[1].Logprob > lp.TopLogprobs[0].Logprob || lp.Logprob > 0 {
			t.Errorf("token %d: %+v", i, lp)
		}
	}
	if joined.String() != want {
		t.Errorf("logprob tokens join to %q, text is %q", joined.String(), want)
	}
}

func TestSDKCompletionTokenPromptLogprobs(t *testing.T) {
	l := loadModel(t, "")
	s := startServer(t, l, Options{})
	c := s.client()
	ctx := context.Background()
	prompt, err := l.Tokenizer.Encode("Once upon a time, there was a", true)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, len(prompt))
	for i, id := range prompt {
		ids[i] = int64(id)
	}
	resp, err := c.Completions.New(ctx, openai.CompletionNewParams{
		Model:       "stories260k",
		Prompt:      openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: ids},
		MaxTokens:   openai.Int(12),
		Temperature: openai.Float(0),
		Logprobs:    openai.Int(2),
	}, option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	ch := resp.Choices[0]
	lp := ch.Logprobs
	if len(lp.Tokens) != 12 || len(lp.TokenLogprobs) != 12 || len(lp.TopLogprobs) != 12 || len(lp.TextOffset) != 12 {
		t.Fatalf("logprobs arrays of lengths %d %d %d %d", len(lp.Tokens), len(lp.TokenLogprobs), len(lp.TopLogprobs), len(lp.TextOffset))
	}
	if strings.Join(lp.Tokens, "") != ch.Text {
		t.Errorf("tokens %q do not spell the text %q", lp.Tokens, ch.Text)
	}
	for i := range lp.Tokens {
		top := lp.TopLogprobs[i]
		if len(top) == 0 || len(top) > 2 || top[lp.Tokens[i]] != lp.TokenLogprobs[i] {
			t.Errorf("token %d %q: logprob %v, top %v", i, lp.Tokens[i], lp.TokenLogprobs[i], top)
		}
	}
	if resp.Usage.PromptTokens != int64(len(prompt)) || resp.Usage.CompletionTokens != 12 || ch.FinishReason != "length" {
		t.Errorf("usage %+v finish %q", resp.Usage, ch.FinishReason)
	}

	// The same prompt as text gives the same continuation (the text
	// prompt gets BOS, like the ids above), and echo prepends it.
	resp2, err := c.Completions.New(ctx, openai.CompletionNewParams{
		Model:       "stories260k",
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time, there was a")},
		MaxTokens:   openai.Int(12),
		Temperature: openai.Float(0),
		Echo:        openai.Bool(true),
	}, option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp2.Choices[0].Text; got != "Once upon a time, there was a"+ch.Text {
		t.Errorf("echo: %q", got)
	}

	// Streaming completions assemble to the same text.
	stream := c.Completions.NewStreaming(ctx, openai.CompletionNewParams{
		Model:       "stories260k",
		Prompt:      openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: ids},
		MaxTokens:   openai.Int(12),
		Temperature: openai.Float(0),
	}, option.WithJSONSet("ignore_eos", true))
	var text strings.Builder
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			text.WriteString(c.Text)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != ch.Text {
		t.Errorf("streamed %q, want %q", text.String(), ch.Text)
	}
}

// TestSDKFixturesGreedy: each tiny fixture, served, returns the greedy
// continuation HF transformers computed for its reference prompt.
func TestSDKFixturesGreedy(t *testing.T) {
	for _, name := range []string{"llama-bf16", "qwen2-bf16", "qwen3-bf16", "llama-mlx-q4g64", "qwen2-mlx-q4g64", "qwen3-mlx-q4g64",
		"gemma3_text-bf16", "gemma3_text-mlx-q4g64", "qwen2_yarn-bf16"} {
		t.Run(name, func(t *testing.T) {
			dir := fixture(name)
			ref, err := modeltest.LoadReference(dir)
			if err != nil {
				t.Fatal(err)
			}
			s := startServer(t, loadModel(t, dir), Options{Parallel: 2})
			ids := make([]int64, len(ref.InputIDs))
			for i, id := range ref.InputIDs {
				ids[i] = int64(id)
			}
			c := s.client()
			resp, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
				Model:       openai.CompletionNewParamsModel(name),
				Prompt:      openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: ids},
				MaxTokens:   openai.Int(int64(len(ref.GreedyIDs))),
				Temperature: openai.Float(0),
				Logprobs:    openai.Int(0),
			}, option.WithJSONSet("ignore_eos", true), option.WithJSONSet("return_tokens_as_token_ids", true))
			if err != nil {
				t.Fatal(err)
			}
			got := tokenIDs(t, resp.Choices[0].Logprobs.Tokens)
			// A near-tie may flip the argmax, and a flip changes the rest
			// of a free-running continuation: compare up to the first one.
			n := len(ref.GreedyIDs)
			for i, m := range ref.Margin {
				if m <= 1e-3 {
					n = i
					break
				}
			}
			if n < 4 {
				t.Fatalf("only %d steps before a near-tie: fixture unusable", n)
			}
			if len(got) < n || !slices.Equal(got[:n], ref.GreedyIDs[:n]) {
				t.Errorf("greedy ids\n got %v\nwant %v (first %d compared)", got, ref.GreedyIDs, n)
			}
			t.Logf("%d/%d greedy steps compared", n, len(ref.GreedyIDs))
		})
	}
}

// tokenIDs reads the generated ids from logprob tokens named
// "token_id:<id>" (return_tokens_as_token_ids).
func tokenIDs(t *testing.T, tokens []string) []int32 {
	t.Helper()
	var ids []int32
	for _, tok := range tokens {
		n, err := strconv.Atoi(strings.TrimPrefix(tok, "token_id:"))
		if err != nil || !strings.HasPrefix(tok, "token_id:") {
			t.Fatalf("logprob token %q is not token_id:<id>", tok)
		}
		ids = append(ids, int32(n))
	}
	return ids
}
