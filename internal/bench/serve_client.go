package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// RequestResult is what one streamed chat completion measured.
type RequestResult struct {
	Start      time.Time
	TTFT       time.Duration   // request sent -> first content chunk
	Gaps       []time.Duration // between successive content chunks
	Latency    time.Duration   // request sent -> end of stream
	Chunks     int             // content chunks received
	Prompt     int             // usage.prompt_tokens (0 if the server sent no usage)
	Completion int             // usage.completion_tokens, else Chunks
	Turn       int             // the request's turn in its conversation (0: the first; ServeOptions.Turns)
	Reply      string          // the content received, which a next turn sends back as the assistant's message
	Err        error
}

// DecodeTokS is this request's generation rate after its first token:
// (tokens - 1) over the time from first to last chunk.
func (r RequestResult) DecodeTokS() float64 {
	var span time.Duration
	for _, g := range r.Gaps {
		span += g
	}
	if r.Completion < 2 || span <= 0 {
		return 0
	}
	return float64(r.Completion-1) / span.Seconds()
}

// chatRequest is the body sent: a streaming chat completion asking for
// usage in the final chunk (stream_options.include_usage), so output
// tokens are counted by the server's tokenizer rather than by chunks
// (a server may put several tokens in one chunk).
type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []chatMessage `json:"messages"`
	MaxTokens     int           `json:"max_tokens"`
	Stream        bool          `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Temperature float64 `json:"temperature"`
	// TopP is sent when set (0: the server's default).
	TopP float64 `json:"top_p,omitempty"`
	// IgnoreEOS keeps every request generating max_tokens, so levels do
	// equal work (vLLM, SGLang and llama.cpp's server accept it).
	IgnoreEOS bool `json:"ignore_eos,omitempty"`
	// ResponseFormat, when set, is sent as is (a constrained-decoding
	// workload: ServeOptions.ResponseFormat).
	ResponseFormat json.RawMessage `json:"response_format,omitempty"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// streamChunk is the part of a chat.completion.chunk the benchmark reads.
type streamChunk struct {
	Choices []struct {
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
		} `json:"delta"`
		Text string `json:"text"` // legacy completions
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// client sends streamed chat requests to one OpenAI-compatible endpoint.
type client struct {
	http      *http.Client
	url       string // .../v1/chat/completions
	apiKey    string
	model     string
	maxTokens int
	ignoreEOS bool
	format    json.RawMessage
	temp      float64 // every request's temperature (0: greedy)
	topP      float64
}

// chatURL turns a base URL (http://host:port or http://host:port/v1) into
// the chat completions endpoint; a URL that already names an endpoint is
// kept.
func chatURL(base string) string {
	u := strings.TrimRight(base, "/")
	switch {
	case strings.HasSuffix(u, "/chat/completions"):
		return u
	case strings.HasSuffix(u, "/v1"):
		return u + "/chat/completions"
	}
	return u + "/v1/chat/completions"
}

// do sends one request of the conversation msgs and reads its stream to
// the end.
func (c *client) do(ctx context.Context, msgs []chatMessage) RequestResult {
	var body chatRequest
	body.Model = c.model
	body.Messages = msgs
	body.MaxTokens = c.maxTokens
	body.Stream = true
	body.StreamOptions.IncludeUsage = true
	body.IgnoreEOS = c.ignoreEOS
	body.ResponseFormat = c.format
	body.Temperature, body.TopP = c.temp, c.topP
	b, _ := json.Marshal(body)
	res := RequestResult{Start: time.Now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(b))
	if err != nil {
		res.Err = err
		return res
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		res.Err = err
		return res
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		res.Err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(msg)))
		return res
	}
	var last time.Time
	var reply strings.Builder
	err = readSSE(resp.Body, func(data []byte) error {
		if string(data) == "[DONE]" {
			return errDone
		}
		var ch streamChunk
		if err := json.Unmarshal(data, &ch); err != nil {
			return fmt.Errorf("bad chunk %q: %v", truncate(string(data), 80), err)
		}
		if ch.Error != nil {
			return fmt.Errorf("server error: %s", ch.Error.Message)
		}
		if ch.Usage != nil {
			res.Prompt, res.Completion = ch.Usage.PromptTokens, ch.Usage.CompletionTokens
		}
		for _, c := range ch.Choices {
			if c.Delta.Content == "" && c.Delta.ReasoningContent == "" && c.Text == "" {
				continue
			}
			reply.WriteString(c.Delta.Content)
			now := time.Now()
			if res.Chunks == 0 {
				res.TTFT = now.Sub(res.Start)
			} else {
				res.Gaps = append(res.Gaps, now.Sub(last))
			}
			last = now
			res.Chunks++
		}
		return nil
	})
	res.Latency = time.Since(res.Start)
	res.Reply = reply.String()
	if err != nil && !errors.Is(err, errDone) {
		res.Err = err
		return res
	}
	if res.Chunks == 0 {
		res.Err = errors.New("stream ended without content")
	}
	if res.Completion == 0 {
		res.Completion = res.Chunks
	}
	return res
}

var errDone = errors.New("[DONE]")

// readSSE calls fn with the data of each server-sent event. Per the SSE
// spec, data lines of one event are joined with newlines, lines starting
// with ':' are comments, and an event ends at a blank line.
func readSSE(r io.Reader, fn func(data []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var data []byte
	have := false
	flush := func() error {
		if !have {
			return nil
		}
		d := data
		data, have = data[:0], false
		return fn(d)
	}
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			line = bytes.TrimRight(line, "\r\n")
			switch {
			case len(line) == 0:
				if ferr := flush(); ferr != nil {
					return ferr
				}
			case line[0] == ':':
			default:
				field, value, _ := bytes.Cut(line, []byte(":"))
				value = bytes.TrimPrefix(value, []byte(" "))
				if string(field) == "data" {
					if have {
						data = append(data, '\n')
					}
					data = append(data, value...)
					have = true
				}
			}
		}
		if err == io.EOF {
			return flush()
		}
		if err != nil {
			return err
		}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// firstModel asks the server's /v1/models for the id of its first model.
func firstModel(ctx context.Context, hc *http.Client, base, apiKey string, timeout time.Duration) (string, error) {
	u := strings.TrimSuffix(chatURL(base), "/chat/completions") + "/models"
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: HTTP %d", u, resp.StatusCode)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&list); err != nil {
		return "", fmt.Errorf("%s: %v", u, err)
	}
	if len(list.Data) == 0 || list.Data[0].ID == "" {
		return "", fmt.Errorf("%s lists no model", u)
	}
	return list.Data[0].ID, nil
}
