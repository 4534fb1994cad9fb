package server

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// sseStream is a raw streaming response read event by event.
type sseStream struct {
	resp *http.Response
	rd   *bufio.Reader
}

// openStream posts a streaming completion request and waits for its first
// event, so the request is running in the engine when it returns.
func openStream(t testing.TB, s *testServer, body string) *sseStream {
	t.Helper()
	resp, err := s.ts.Client().Post(s.url+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("stream: %d %s", resp.StatusCode, b)
	}
	st := &sseStream{resp: resp, rd: bufio.NewReader(resp.Body)}
	if _, err := st.next(); err != nil {
		t.Fatal(err)
	}
	return st
}

// next returns the next event's data ("[DONE]" at the end).
func (s *sseStream) next() (string, error) {
	for {
		line, err := s.rd.ReadString('\n')
		if err != nil {
			return "", err
		}
		if data, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok {
			return data, nil
		}
	}
}

func (s *sseStream) Close() { s.resp.Body.Close() }

func counterValue(t testing.TB, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	t.Fatalf("not a counter, gauge or histogram: %v", &m)
	return 0
}

// TestDisconnectFreesSlot: a streaming client that goes away mid-stream
// cancels its request at once: running requests and KV usage return to 0
// within a second.
func TestDisconnectFreesSlot(t *testing.T) {
	s := startServer(t, loadModel(t, ""), Options{Parallel: 4})
	var streams []*sseStream
	for range 3 {
		streams = append(streams, openStream(t, s, `{"prompt":"Once upon a time","max_tokens":480,"ignore_eos":true,"stream":true}`))
	}
	st := s.Engine().Stats()
	if st.Running+st.Waiting != 3 || st.KVUsage == 0 {
		t.Fatalf("before disconnect: %+v", st)
	}
	// Read a few tokens more, then hang up.
	for _, c := range streams {
		for range 3 {
			if _, err := c.next(); err != nil {
				t.Fatal(err)
			}
		}
	}
	hungUp := time.Now()
	for _, c := range streams {
		c.Close()
	}
	deadline := hungUp.Add(time.Second)
	for {
		st = s.Engine().Stats()
		if st.Running == 0 && st.Waiting == 0 && st.KVUsage == 0 && st.KVBlocksUsed == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("1s after the disconnect: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("freed %v after the disconnect", time.Since(hungUp))
	// The cancellation is counted once per request as such.
	waitFor(t, func() bool { return counterValue(t, s.metrics.requests.WithLabelValues(outcomeCancelled)) == 3 })
	// The server keeps serving.
	if status, body := s.post(t, "/v1/completions", `{"prompt":"Once","max_tokens":3}`); status != http.StatusOK {
		t.Fatalf("after disconnects: %d %v", status, body)
	}
}

// waitFor polls cond for up to 5 seconds.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStreamShape checks the chat chunk sequence: a role chunk first,
// content chunks, a final chunk with the finish reason and timings, the
// usage chunk with no choices, then [DONE].
func TestStreamShape(t *testing.T) {
	s := startServer(t, loadModel(t, ""), Options{})
	resp, err := s.ts.Client().Post(s.url+"/v1/chat/completions", "application/json", strings.NewReader(
		`{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":6,"temperature":0,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	st := &sseStream{resp: resp, rd: bufio.NewReader(resp.Body)}
	defer st.Close()
	var events []chatChunk
	for {
		data, err := st.next()
		if err != nil {
			t.Fatal(err)
		}
		if data == "[DONE]" {
			break
		}
		var c chatChunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		events = append(events, c)
	}
	if len(events) < 4 {
		t.Fatalf("%d events", len(events))
	}
	first, last, usageEv := events[0], events[len(events)-2], events[len(events)-1]
	if first.Choices[0].Delta.Role != "assistant" {
		t.Errorf("first chunk %+v", first)
	}
	if r := last.Choices[0].FinishReason; r == nil || *r != "length" || last.Timings == nil || last.Timings.PredictedN != 6 {
		t.Errorf("last chunk %+v", last)
	}
	if len(usageEv.Choices) != 0 || usageEv.Usage == nil || usageEv.Usage.CompletionTokens != 6 {
		t.Errorf("usage chunk %+v", usageEv)
	}
	for _, e := range events {
		if e.ID != first.ID || e.Object != "chat.completion.chunk" {
			t.Errorf("chunk id %q object %q", e.ID, e.Object)
		}
	}
}

// collectCompletionStream runs a streaming completion and returns its
// text and finish reason.
func collectCompletionStream(t testing.TB, s *testServer, req map[string]any) (text, reason string) {
	t.Helper()
	b, _ := json.Marshal(req)
	resp, err := s.ts.Client().Post(s.url+"/v1/completions", "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	st := &sseStream{resp: resp, rd: bufio.NewReader(resp.Body)}
	defer st.Close()
	var sb strings.Builder
	for {
		data, err := st.next()
		if err != nil {
			t.Fatal(err)
		}
		if data == "[DONE]" {
			return sb.String(), reason
		}
		var c completion
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		for _, ch := range c.Choices {
			sb.WriteString(ch.Text)
			if ch.FinishReason != nil {
				reason = *ch.FinishReason
			}
		}
	}
}
