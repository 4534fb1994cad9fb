package server

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// greedyResult is what a greedy request returned.
type greedyResult struct {
	text     string
	ids      []int32
	logprobs []float64
}

func greedyCompletion(t testing.TB, c openai.Client, prompt string, maxTokens int) (greedyResult, error) {
	resp, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
		Model:       "stories260k",
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
		MaxTokens:   openai.Int(int64(maxTokens)),
		Temperature: openai.Float(0),
		Logprobs:    openai.Int(0),
	}, option.WithJSONSet("ignore_eos", true), option.WithJSONSet("return_tokens_as_token_ids", true))
	if err != nil {
		return greedyResult{}, err
	}
	ch := resp.Choices[0]
	r := greedyResult{text: ch.Text, logprobs: ch.Logprobs.TokenLogprobs}
	for _, tok := range ch.Logprobs.Tokens {
		var id int32
		if _, err := fmt.Sscanf(tok, "token_id:%d", &id); err != nil {
			return r, fmt.Errorf("token %q: %v", tok, err)
		}
		r.ids = append(r.ids, id)
	}
	return r, nil
}

// TestBatchInvariance: 8 concurrent greedy requests with different
// prompts (and lengths, so prefill chunks mix with decodes) return exactly
// what each returns alone: text, token ids and logprobs.
func TestBatchInvariance(t *testing.T) {
	s := startServer(t, loadModel(t, ""), Options{Parallel: 8, PrefillChunk: 24})
	c := s.client()
	prompts := []string{
		"Once upon a time",
		"The little dog",
		"Lily and Ben went to the park. They saw a big tree with many birds in it, and",
		"Tom",
		"One day, a girl named Sue found a shiny box under her bed. She opened it and",
		"The sun was hot",
		"Mom said",
		"There was a big red ball in the garden. The cat wanted to play with it, so",
	}
	alone := make([]greedyResult, len(prompts))
	for i, p := range prompts {
		r, err := greedyCompletion(t, c, p, 30+3*i)
		if err != nil {
			t.Fatal(err)
		}
		alone[i] = r
	}
	together := make([]greedyResult, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Go(func() {
			r, err := greedyCompletion(t, c, p, 30+3*i)
			if err != nil {
				t.Error(err)
			}
			together[i] = r
		})
	}
	wg.Wait()
	for i := range prompts {
		a, b := alone[i], together[i]
		if a.text != b.text || !slices.Equal(a.ids, b.ids) || !slices.Equal(a.logprobs, b.logprobs) {
			t.Errorf("prompt %d: batched %q %v\nalone %q %v", i, b.text, b.ids, a.text, a.ids)
		}
	}
}

// TestManyStreams: 64 concurrent streams on loopback all complete, no
// goroutine outlives them, and the metrics add up to the requests made.
func TestManyStreams(t *testing.T) {
	const n = 64
	const maxTokens = 12
	s := startServer(t, loadModel(t, ""), Options{Parallel: 8, MaxQueue: n})
	// A private transport, so its idle keep-alive connections (and the
	// goroutines serving them on both ends) can be closed at the end.
	tr := &http.Transport{MaxIdleConnsPerHost: n}
	hc := &http.Client{Transport: tr}
	c := s.client(option.WithHTTPClient(hc))
	before := runtime.NumGoroutine()

	type result struct {
		text       string
		usage      openai.CompletionUsage
		finish     string
		chunks     int
		err        error
		chatStream bool
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := &results[i]
			if i%2 == 0 {
				stream := c.Completions.NewStreaming(context.Background(), openai.CompletionNewParams{
					Model:         "stories260k",
					Prompt:        openai.CompletionNewParamsPromptUnion{OfString: openai.String(fmt.Sprintf("Story %d: once upon a time", i))},
					MaxTokens:     openai.Int(maxTokens),
					StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
				}, option.WithJSONSet("ignore_eos", true))
				for stream.Next() {
					cur := stream.Current()
					r.chunks++
					for _, ch := range cur.Choices {
						r.text += ch.Text
						if ch.FinishReason != "" {
							r.finish = string(ch.FinishReason)
						}
					}
					if cur.Usage.TotalTokens > 0 {
						r.usage = cur.Usage
					}
				}
				r.err = stream.Err()
				return
			}
			r.chatStream = true
			stream := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
				Model:         "stories260k",
				Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprintf("Tell story %d", i))},
				MaxTokens:     openai.Int(maxTokens),
				StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
			}, option.WithJSONSet("ignore_eos", true))
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				acc.AddChunk(stream.Current())
				r.chunks++
			}
			r.err = stream.Err()
			if len(acc.Choices) > 0 {
				r.text, r.finish = acc.Choices[0].Message.Content, acc.Choices[0].FinishReason
			}
			r.usage = openai.CompletionUsage{PromptTokens: acc.Usage.PromptTokens, CompletionTokens: acc.Usage.CompletionTokens, TotalTokens: acc.Usage.TotalTokens}
		})
	}
	wg.Wait()
	var promptSum int64
	for i, r := range results {
		if r.err != nil || r.finish != "length" || r.usage.CompletionTokens != maxTokens || r.chunks < 3 {
			t.Errorf("stream %d (chat %v): err %v finish %q usage %+v chunks %d", i, r.chatStream, r.err, r.finish, r.usage, r.chunks)
		}
		promptSum += r.usage.PromptTokens
	}

	// Metrics: one outcome per request, tokens as reported in usage.
	m := s.metrics
	waitFor(t, func() bool { return counterValue(t, m.requests.WithLabelValues("length")) == n })
	for _, o := range allOutcomes {
		if want := map[bool]float64{true: n}[o == "length"]; counterValue(t, m.requests.WithLabelValues(o)) != want {
			t.Errorf("requests{outcome=%q} = %v, want %v", o, counterValue(t, m.requests.WithLabelValues(o)), want)
		}
	}
	if got := counterValue(t, m.genTokens); got != n*maxTokens {
		t.Errorf("generation tokens %v, want %d", got, n*maxTokens)
	}
	if got := counterValue(t, m.promptTokens); got != float64(promptSum) {
		t.Errorf("prompt tokens %v, want %d", got, promptSum)
	}
	for _, h := range []struct {
		name string
		v    float64
	}{
		{"ttft", counterValue(t, m.ttft)}, {"decode_tok_s", counterValue(t, m.decodeTokS)},
		{"queue", counterValue(t, m.queue)}, {"e2e", counterValue(t, m.e2e)}, {"itl", counterValue(t, m.itl)},
	} {
		if h.v != n {
			t.Errorf("histogram %s has %v samples, want %d", h.name, h.v, n)
		}
	}
	st := s.Engine().Stats()
	if st.Running != 0 || st.Waiting != 0 || st.KVBlocksUsed != 0 {
		t.Errorf("engine not idle: %+v", st)
	}

	// No goroutine leak: once the client's idle connections are closed,
	// the count returns to what it was.
	tr.CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
