package server

import (
	"bytes"
	"encoding/json"
	"math"
	"unicode/utf8"

	"github.com/mlxcel/mlxcel/internal/generate"
)

// minLogprob stands in for -Inf (a masked token), which JSON cannot
// carry; vLLM uses the same value.
const minLogprob = -9999

func finiteLogprob(lp float32) float32 {
	if math.IsInf(float64(lp), -1) || math.IsNaN(float64(lp)) || lp < minLogprob {
		return minLogprob
	}
	return lp
}

// byteList marshals as a JSON array of numbers (a []byte would be base64).
type byteList []byte

func (b byteList) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, c := range b {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(itoa(int64(c)))
	}
	buf.WriteByte(']')
	return buf.Bytes(), nil
}

// Chat logprobs: {"content": [{"token", "logprob", "bytes", "top_logprobs"}]}.
type chatLogprobs struct {
	Content []chatTokenLogprob `json:"content"`
}

type chatTokenLogprob struct {
	Token       string         `json:"token"`
	Logprob     float32        `json:"logprob"`
	Bytes       byteList       `json:"bytes"`
	TopLogprobs []chatTopEntry `json:"top_logprobs"`
}

type chatTopEntry struct {
	Token   string   `json:"token"`
	Logprob float32  `json:"logprob"`
	Bytes   byteList `json:"bytes"`
}

// tokenLabel is how logprobs name a token: its text, or with vLLM's
// return_tokens_as_token_ids "token_id:<id>", which stays unambiguous
// when several tokens share a text (byte pieces of one character).
func (m *served) tokenLabel(id int32, asIDs bool) string {
	if asIDs {
		return "token_id:" + itoa(int64(id))
	}
	return m.texts.text(id)
}

func (m *served) chatLogprob(d generate.Delta, asIDs bool) chatTokenLogprob {
	text := m.texts.text(d.Token)
	e := chatTokenLogprob{Token: m.tokenLabel(d.Token, asIDs), Logprob: finiteLogprob(d.Logprob), Bytes: byteList(text),
		TopLogprobs: []chatTopEntry{}}
	for _, t := range d.Top {
		tt := m.texts.text(t.ID)
		e.TopLogprobs = append(e.TopLogprobs, chatTopEntry{Token: m.tokenLabel(t.ID, asIDs), Logprob: finiteLogprob(t.Logprob), Bytes: byteList(tt)})
	}
	return e
}

// Text completion logprobs, the legacy shape: parallel arrays, and per
// token a {token: logprob} object of the top alternatives.
type completionLogprobs struct {
	Tokens        []string   `json:"tokens"`
	TokenLogprobs []float32  `json:"token_logprobs"`
	TopLogprobs   []topOrder `json:"top_logprobs"`
	TextOffset    []int      `json:"text_offset"`
}

// topOrder marshals as a JSON object whose keys keep the most-likely-first
// order (a Go map would sort them by text).
type topOrder struct {
	texts []string
	lps   []float32
}

func (t topOrder) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	seen := map[string]bool{}
	for i, s := range t.texts {
		if seen[s] { // two ids with the same text: keep the likelier
			continue
		}
		if len(seen) > 0 {
			buf.WriteByte(',')
		}
		seen[s] = true
		k, _ := json.Marshal(s)
		v, _ := json.Marshal(t.lps[i])
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// newCompletionLogprobs makes the empty arrays (JSON [] rather than null).
func newCompletionLogprobs() *completionLogprobs {
	return &completionLogprobs{Tokens: []string{}, TokenLogprobs: []float32{}, TopLogprobs: []topOrder{}, TextOffset: []int{}}
}

// add appends one token; offset is where its text starts in the choice's
// text (in characters, as Python's len counts them). It returns the
// offset of the next token.
func (c *completionLogprobs) add(m *served, d generate.Delta, offset int, asIDs bool) int {
	c.Tokens = append(c.Tokens, m.tokenLabel(d.Token, asIDs))
	c.TokenLogprobs = append(c.TokenLogprobs, finiteLogprob(d.Logprob))
	c.TextOffset = append(c.TextOffset, offset)
	var top topOrder
	for _, t := range d.Top {
		top.texts = append(top.texts, m.tokenLabel(t.ID, asIDs))
		top.lps = append(top.lps, finiteLogprob(t.Logprob))
	}
	c.TopLogprobs = append(c.TopLogprobs, top)
	return offset + utf8.RuneCountInString(m.texts.text(d.Token))
}
