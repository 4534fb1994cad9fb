package server

import (
	"net/http"
	"strings"
	"testing"
)

// TestBadRequests: every malformed or refused request gets its 4xx in the
// OpenAI error shape, and the server answers the next good request.
func TestBadRequests(t *testing.T) {
	const key = "sk-test-key"
	s := startServer(t, loadModel(t, ""), Options{APIKey: key, MaxBodyBytes: 4 << 20})
	auth := []string{"Authorization", "Bearer " + key}
	msgs := `"messages":[{"role":"user","content":"Hi"}]`
	longPrompt := "[" + strings.Repeat("5,", 599) + "5]"
	huge := `{"prompt":"` + strings.Repeat("a", 20<<20) + `"}`

	cases := []struct {
		name, path, body string
		header           []string
		status           int
		param, code      string
	}{
		{"malformed JSON", "/v1/chat/completions", `{"model": "stories260k", "messages": [`, auth, 400, "", ""},
		{"not an object", "/v1/chat/completions", `[1,2]`, auth, 400, "", ""},
		{"empty body", "/v1/completions", ``, auth, 400, "", ""},
		{"messages not an array", "/v1/chat/completions", `{"messages":"hi"}`, auth, 400, "messages", ""},
		{"max_tokens a string", "/v1/chat/completions", `{` + msgs + `,"max_tokens":"ten"}`, auth, 400, "max_tokens", ""},
		{"temperature a string", "/v1/completions", `{"prompt":"a","temperature":"hot"}`, auth, 400, "temperature", ""},
		{"stop a number", "/v1/completions", `{"prompt":"a","stop":7}`, auth, 400, "stop", ""},
		{"prompt an object", "/v1/completions", `{"prompt":{"a":1}}`, auth, 400, "prompt", ""},
		{"unknown model", "/v1/chat/completions", `{"model":"gpt-9",` + msgs + `}`, auth, 404, "model", "model_not_found"},
		{"max_tokens 0", "/v1/chat/completions", `{` + msgs + `,"max_tokens":0}`, auth, 400, "max_tokens", ""},
		{"max_tokens negative", "/v1/completions", `{"prompt":"a","max_tokens":-3}`, auth, 400, "max_tokens", ""},
		{"max_completion_tokens 0", "/v1/chat/completions", `{` + msgs + `,"max_completion_tokens":0}`, auth, 400, "max_tokens", ""},
		{"max_tokens beyond the context", "/v1/completions", `{"prompt":"a","max_tokens":100000}`, auth, 400, "max_tokens", ""},
		{"prompt longer than the context", "/v1/completions", `{"prompt":` + longPrompt + `,"max_tokens":4}`, auth, 400, "prompt", ""},
		{"token id outside the vocabulary", "/v1/completions", `{"prompt":[1,99999]}`, auth, 400, "prompt", ""},
		{"two prompts", "/v1/completions", `{"prompt":["a","b"]}`, auth, 400, "prompt", ""},
		{"invalid UTF-8", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"caf\xe9\"}]}", auth, 400, "", ""},
		{"empty messages", "/v1/chat/completions", `{"messages":[]}`, auth, 400, "messages", ""},
		{"unknown role", "/v1/chat/completions", `{"messages":[{"role":"wizard","content":"hi"}]}`, auth, 400, "messages[0].role", ""},
		{"message without content", "/v1/chat/completions", `{"messages":[{"role":"user"}]}`, auth, 400, "messages[0].content", ""},
		{"image part", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, auth, 400, "messages[0].content", ""},
		{"n=0", "/v1/chat/completions", `{` + msgs + `,"n":0}`, auth, 400, "n", ""},
		{"n=129", "/v1/chat/completions", `{` + msgs + `,"n":129}`, auth, 400, "n", ""},
		{"completions n=2", "/v1/completions", `{"prompt":"x","n":2}`, auth, 400, "n", ""},
		{"tools not a list", "/v1/chat/completions", `{` + msgs + `,"tools":{"type":"function"}}`, auth, 400, "tools", ""},
		{"tool without name", "/v1/chat/completions", `{` + msgs + `,"tools":[{"type":"function","function":{"description":"x"}}]}`, auth, 400, "tools[0].function.name", ""},
		{"tool of another type", "/v1/chat/completions", `{` + msgs + `,"tools":[{"type":"retrieval"}]}`, auth, 400, "tools[0].type", ""},
		{"named tool_choice not in tools", "/v1/chat/completions", `{` + msgs + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}}`, auth, 400, "tool_choice", ""},
		{"tool_choice required without tools", "/v1/chat/completions", `{` + msgs + `,"tool_choice":"required"}`, auth, 400, "tool_choice", ""},
		{"tool_choice unknown", "/v1/chat/completions", `{` + msgs + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"sometimes"}`, auth, 400, "tool_choice", ""},
		{"logit_bias key not an id", "/v1/chat/completions", `{` + msgs + `,"logit_bias":{"abc":1}}`, auth, 400, "logit_bias", ""},
		{"logit_bias id beyond vocab", "/v1/chat/completions", `{` + msgs + `,"logit_bias":{"512":1}}`, auth, 400, "logit_bias", ""},
		{"logit_bias value out of range", "/v1/chat/completions", `{` + msgs + `,"logit_bias":{"5":100.5}}`, auth, 400, "logit_bias", ""},
		{"logit_bias not an object", "/v1/chat/completions", `{` + msgs + `,"logit_bias":[1]}`, auth, 400, "logit_bias", ""},
		{"reasoning_effort unknown", "/v1/chat/completions", `{` + msgs + `,"reasoning_effort":"max"}`, auth, 400, "reasoning_effort", ""},
		{"history tool call without name", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"arguments":"{}"}}]}]}`, auth, 400, "messages[1].tool_calls[0].function.name", ""},
		{"temperature out of range", "/v1/chat/completions", `{` + msgs + `,"temperature":5}`, auth, 400, "temperature", ""},
		{"top_p zero", "/v1/completions", `{"prompt":"a","top_p":0}`, auth, 400, "top_p", ""},
		{"top_logprobs without logprobs", "/v1/chat/completions", `{` + msgs + `,"top_logprobs":2}`, auth, 400, "top_logprobs", ""},
		{"top_logprobs too many", "/v1/chat/completions", `{` + msgs + `,"logprobs":true,"top_logprobs":50}`, auth, 400, "top_logprobs", ""},
		{"logprobs too many", "/v1/completions", `{"prompt":"a","logprobs":21}`, auth, 400, "logprobs", ""},
		{"stream_options without stream", "/v1/completions", `{"prompt":"a","stream_options":{"include_usage":true}}`, auth, 400, "stream_options", ""},
		{"body of many MB", "/v1/completions", huge, auth, 413, "", "request_too_large"},
		{"wrong API key", "/v1/chat/completions", `{` + msgs + `}`, []string{"Authorization", "Bearer sk-wrong"}, 401, "", "invalid_api_key"},
		{"no API key", "/v1/completions", `{"prompt":"a"}`, nil, 401, "", "invalid_api_key"},
		{"API key without Bearer", "/v1/completions", `{"prompt":"a"}`, []string{"Authorization", key}, 401, "", "invalid_api_key"},
		{"detokenize outside the vocabulary", "/detokenize", `{"tokens":[-1]}`, auth, 400, "tokens", ""},
		{"tokenize without content", "/tokenize", `{}`, auth, 400, "content", ""},
		{"unknown endpoint", "/v1/embeddings", `{}`, auth, 404, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := s.post(t, c.path, c.body, c.header...)
			if status != c.status {
				t.Errorf("status %d, want %d: %v", status, c.status, body)
			}
			e := errorOf(t, body)
			if c.param != "" && e["param"] != c.param {
				t.Errorf("param %v, want %q: %v", e["param"], c.param, e["message"])
			}
			if c.code != "" && e["code"] != c.code {
				t.Errorf("code %v, want %q", e["code"], c.code)
			}
			wantType := map[int]string{400: typeInvalid, 401: typeAuth, 404: typeInvalid, 413: typeInvalid}[c.status]
			if c.name == "unknown endpoint" {
				wantType = typeNotFound
			}
			if e["type"] != wantType {
				t.Errorf("type %v, want %q", e["type"], wantType)
			}
			// The server still answers a good request.
			status, body = s.post(t, "/v1/completions", `{"prompt":"Once","max_tokens":3}`, auth...)
			if status != http.StatusOK {
				t.Fatalf("good request after %q: %d %v", c.name, status, body)
			}
		})
	}

	// Methods other than the endpoint's get 405 in the same shape.
	status, body := s.get(t, "/v1/chat/completions", auth...)
	if status != http.StatusMethodNotAllowed {
		t.Errorf("GET chat: %d", status)
	}
	errorOf(t, body)
	// /health and /metrics need no key.
	if status, _ := s.get(t, "/health"); status != http.StatusOK {
		t.Errorf("/health with auth on: %d", status)
	}
	resp, err := s.ts.Client().Get(s.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/metrics with auth on: %d", resp.StatusCode)
	}
}

// TestQueueFull: with every slot busy and no queue, a request gets 429
// with Retry-After, and is counted as rejected.
func TestQueueFull(t *testing.T) {
	s := startServer(t, loadModel(t, ""), Options{Parallel: 1, MaxQueue: -1})
	// Occupy the only slot with a long stream.
	stream := openStream(t, s, `{"prompt":"Once","max_tokens":400,"ignore_eos":true,"stream":true}`)
	defer stream.Close()
	req, _ := http.NewRequest("POST", s.url+"/v1/completions", strings.NewReader(`{"prompt":"a","max_tokens":2}`))
	resp, err := s.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := decodeBody(t, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d, Retry-After %q: %v", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if e := errorOf(t, body); e["type"] != typeRateLimit {
		t.Errorf("type %v", e["type"])
	}
	if got := counterValue(t, s.metrics.requests.WithLabelValues(outcomeRejected)); got != 1 {
		t.Errorf("rejected counter %v", got)
	}
}
