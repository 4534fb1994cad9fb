package grammar

import (
	"fmt"
	"testing"
)

// agentTools is a realistic agent framework's tool list: five
// OpenAI-style functions whose parameters nest objects and arrays, with
// enums, bounded and unbounded strings, numbers, integers and booleans.
var agentTools = []Tool{
	{Name: "get_weather", Parameters: []byte(`{"type":"object","properties":{
		"location":{"type":"string","description":"City and country, e.g. Paris, France"},
		"unit":{"type":"string","enum":["celsius","fahrenheit"]},
		"days":{"type":"integer","minimum":1,"maximum":14}},
		"required":["location"],"additionalProperties":false}`)},
	{Name: "search_web", Parameters: []byte(`{"type":"object","properties":{
		"query":{"type":"string"},
		"max_results":{"type":"integer","minimum":1,"maximum":50},
		"filters":{"type":"object","properties":{
			"site":{"type":"string"},
			"recency":{"type":"string","enum":["day","week","month","year","any"]},
			"safe":{"type":"boolean"}},"required":["recency"]}},
		"required":["query"]}`)},
	{Name: "create_event", Parameters: []byte(`{"type":"object","properties":{
		"title":{"type":"string","maxLength":80},
		"start":{"type":"string","description":"ISO 8601"},
		"duration_minutes":{"type":"number"},
		"attendees":{"type":"array","items":{"type":"object","properties":{
			"email":{"type":"string"},
			"role":{"type":"string","enum":["required","optional"]}},"required":["email"]},"maxItems":10},
		"reminders":{"type":"array","items":{"type":"integer","minimum":0,"maximum":1440}}},
		"required":["title","start"]}`)},
	{Name: "run_sql", Parameters: []byte(`{"type":"object","properties":{
		"database":{"type":"string","enum":["analytics","billing","users"]},
		"statement":{"type":"string"},
		"params":{"type":"array","items":{"anyOf":[{"type":"string"},{"type":"number"},{"type":"null"}]}},
		"timeout_s":{"type":"number"},
		"read_only":{"type":"boolean"}},
		"required":["database","statement"]}`)},
	{Name: "send_email", Parameters: []byte(`{"type":"object","properties":{
		"to":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":5},
		"subject":{"type":"string","maxLength":120},
		"body":{"type":"string"},
		"priority":{"type":"string","enum":["low","normal","high"]},
		"attachments":{"type":"array","items":{"type":"object","properties":{
			"name":{"type":"string"},"url":{"type":"string"},"size_kb":{"type":"number"}},
			"required":["name","url"]}}},
		"required":["to","subject","body"]}`)},
}

// agentCalls is two calls of agentTools in the hermes syntax, as a model
// following the Qwen template writes them.
const agentCalls = "<tool_call>\n" +
	`{"name": "search_web", "arguments": {"query": "weather in Paris tomorrow", "max_results": 5, "filters": {"recency": "day", "safe": true}}}` +
	"\n</tool_call>\n<tool_call>\n" +
	`{"name": "create_event", "arguments": {"title": "Picnic", "start": "2026-06-01T12:00", "duration_minutes": 90.5, "attendees": [{"email": "ada@example.org", "role": "optional"}], "reminders": [30, 5]}}` +
	"\n</tool_call>"

// BenchmarkCompileToolCalls is what a request with a new tool set pays
// before its first token: the hermes grammar of agentTools, one call
// (named or parallel calls off) and up to maxForcedCalls (4: required
// with parallel calls, the server's default).
func BenchmarkCompileToolCalls(b *testing.B) {
	for _, calls := range []int{1, 4} {
		b.Run(fmt.Sprintf("calls=%d", calls), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ToolCalls("hermes", agentTools, calls, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkToolCallsFirstRequest is the mask work of a first request
// with that tool set, after the compile: agentCalls decoded over Llama 3
// (128256 tokens), every state's mask computed on first visit, per token.
func BenchmarkToolCallsFirstRequest(b *testing.B) {
	tok := loadTok(b, "tokenizers/llama3_1")
	v := NewVocab(tok, tok.VocabSize())
	g, err := ToolCalls("hermes", agentTools, 4, Options{})
	if err != nil {
		b.Fatal(err)
	}
	if !g.Accepts([]byte(agentCalls)) {
		b.Fatal("the grammar refuses agentCalls")
	}
	ids, err := tok.Encode(agentCalls, false)
	if err != nil {
		b.Fatal(err)
	}
	eos, _ := tok.EOS()
	ids = append(ids, eos)
	mask := make([]uint64, v.Words())
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			run(b, NewTokenTable(g, v), ids, eos, mask)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ids))/1e3, "us/token")
	})
	b.Run("warm", func(b *testing.B) {
		tt := NewTokenTable(g, v)
		run(b, tt, ids, eos, mask)
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			run(b, tt, ids, eos, mask)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ids))/1e3, "us/token")
	})
}
