package generate_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/app"
	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/generate"
)

// The embedded model's greedy story from BOS contains "Lily"; a stop
// string split across tokens ends the request as "stop", with the text
// before it and the engine's timing.
func TestStopStringEndsRequestWithTiming(t *testing.T) {
	l, err := app.Load(app.Options{Backend: "cpu", Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(l.Model, engine.Config{Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	eng.Start()
	defer eng.Stop()
	bos, _ := l.Tokenizer.BOS()
	full, err := generate.Run(context.Background(), eng, l.Tokenizer.NewStreamDecoder(true), generate.Request{
		Request: engine.Request{Prompt: []int32{bos}, MaxTokens: 60, IgnoreEOS: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(full.Text, "Lily")
	if i < 0 {
		t.Fatalf("story has no Lily: %q", full.Text)
	}
	var streamed strings.Builder
	res, err := generate.Run(context.Background(), eng, l.Tokenizer.NewStreamDecoder(true), generate.Request{
		Request: engine.Request{Prompt: []int32{bos}, MaxTokens: 60, IgnoreEOS: true}, Stop: []string{"ily"}},
		func(d generate.Delta) error { streamed.WriteString(d.Text); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != full.Text[:i+1] || streamed.String() != res.Text {
		t.Fatalf("got %q (streamed %q), want %q", res.Text, streamed.String(), full.Text[:i+1])
	}
	if res.FinishReason != engine.FinishStop || res.Timing.GeneratedTokens == 0 || res.Timing.TTFT <= 0 {
		t.Fatalf("finish %q timing %+v", res.FinishReason, res.Timing)
	}
	if st := eng.Stats(); st.Cancelled != 0 || st.Running != 0 {
		t.Fatalf("engine stats after stop: %+v", st)
	}
}
