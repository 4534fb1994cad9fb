package server

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/generate"
	"github.com/mlxcel/mlxcel/internal/reasoning"
	"github.com/mlxcel/mlxcel/internal/toolcall"
)

// maxChoices bounds n, as the OpenAI API does.
const maxChoices = 128

// chatJob is a validated chat request, ready to run its n choices.
type chatJob struct {
	m       *served
	req     *chatRequest
	greq    generate.Request
	n       int
	wantLP  bool
	tools   []toolDef
	choice  toolChoice
	opened  bool // the prompt opened a thought: the answer starts in it
	id      string
	created int64
}

func newChatJob(m *served, req *chatRequest) (*chatJob, *apiError) {
	if e := req.check(m); e != nil {
		return nil, e
	}
	wantLP, top, e := req.logprobOptions()
	if e != nil {
		return nil, e
	}
	if e := req.checkReasoningEffort(); e != nil {
		return nil, e
	}
	tools, e := parseTools(req.Tools)
	if e != nil {
		return nil, e
	}
	choice, e := parseToolChoice(req.ToolChoice, tools)
	if e != nil {
		return nil, e
	}
	prompt, text, e := req.prompt(m)
	if e != nil {
		return nil, e
	}
	maxTokens := req.MaxTokens
	if req.MaxCompletionTokens != nil {
		maxTokens = req.MaxCompletionTokens
	}
	greq, e := req.request(m, prompt, "messages", maxTokens, top)
	if e != nil {
		return nil, e
	}
	greq.NeedLogprob = wantLP
	if e := m.constrain(&greq, req.ResponseFormat, choice, tools, req.parallelCalls(), text); e != nil { // constraint.go
		return nil, e
	}
	j := &chatJob{m: m, req: req, greq: greq, n: 1, wantLP: wantLP, tools: tools, choice: choice,
		id: newID("chatcmpl-"), created: time.Now().Unix()}
	if req.N != nil {
		j.n = *req.N
	}
	if p := m.agent.reasoningParser; p != "" {
		j.opened = reasoning.OpenedIn(p, text)
	}
	return j, nil
}

// newAnswer reads one choice back with the model's parsers; tool calls
// are looked for only when the request offers tools and allows calls.
func (j *chatJob) newAnswer() *answer {
	a := &answer{parallel: j.req.parallelCalls()}
	if p := j.m.agent.reasoningParser; p != "" {
		a.rs, _ = reasoning.NewStream(p, j.opened)
	}
	if p := j.m.agent.toolParser; p != "" && len(j.tools) > 0 && j.choice.mode != "none" {
		a.tc, _ = toolcall.NewStream(p)
		schemas := make(map[string]json.RawMessage, len(j.tools))
		for _, t := range j.tools {
			schemas[t.Name] = t.Parameters
		}
		a.tc.Schemas(schemas) // typeless syntaxes read values by the schema
	}
	return a
}

// choiceRequest is choice i's generation request: a seeded request gets
// seed+i, so n seeded choices differ and still repeat.
func (j *chatJob) choiceRequest(i int) generate.Request {
	r := j.greq
	r.Constraint = cloneConstraint(r.Constraint) // each choice its own matcher
	if i > 0 && r.Params.Seed != nil {
		s := *r.Params.Seed + uint64(i)
		r.Params.Seed = &s
	}
	return r
}

// runChoices generates the n choices, emit called per delta with the
// choice's index (from several goroutines when n > 1). Choice 0 runs
// first; the others are submitted once its prompt is in the KV cache
// (its first token), so they share the prompt's blocks through the
// prefix cache instead of computing it n times. A submission error of
// any choice is returned, after the others are cancelled. done, when set,
// is called as each choice ends (from its goroutine).
func (s *Server) runChoices(ctx context.Context, j *chatJob, emit func(i int, d generate.Delta) error,
	done func(i int, g *generation)) ([]*generation, *apiError) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gens := make([]*generation, j.n)
	errs := make([]*apiError, j.n)
	prefilled := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	run := func(i int) {
		defer wg.Done()
		g, e := s.generate(ctx, j.m, j.choiceRequest(i), func(d generate.Delta) error {
			if i == 0 && d.Token >= 0 {
				once.Do(func() { close(prefilled) })
			}
			return emit(i, d)
		})
		if i == 0 {
			once.Do(func() { close(prefilled) })
		}
		if e != nil {
			cancel()
		} else if done != nil {
			done(i, g)
		}
		gens[i], errs[i] = g, e
	}
	wg.Add(1)
	go run(0)
	if j.n > 1 {
		<-prefilled
		for i := 1; i < j.n; i++ {
			wg.Add(1)
			go run(i)
		}
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			return nil, e
		}
	}
	return gens, nil
}

// sumUsage: the prompt counts once, completions add up (OpenAI's n).
func sumUsage(gens []*generation) usage {
	u := gens[0].usage
	for _, g := range gens[1:] {
		u.CompletionTokens += g.usage.CompletionTokens
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// chatStreamer writes the chunks of every choice of one stream.
type chatStreamer struct {
	mu      sync.Mutex
	out     *sse
	j       *chatJob
	roleOut []bool
	err     error // a failed write at a choice's end: the client is gone
}

// finish sends a choice's held-back text and its last chunk, which
// carries its finish reason and llama-server's timings.
func (c *chatStreamer) finish(i int, a *answer, g *generation) {
	var err error
	if p := a.close(); !p.empty() {
		err = c.send(piece(i, p, nil))
	}
	fr := a.finish(finishReason(&g.res))
	if err == nil {
		err = c.send(chatChunkChoice{Index: i, FinishReason: &fr, Timings: &g.timings})
	}
	if err != nil {
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
	}
}

func (c *chatStreamer) chunk(ch chatChunkChoice) chatChunk {
	return chatChunk{ID: c.j.id, Object: "chat.completion.chunk", Created: c.j.created, Model: c.j.m.name,
		Choices: []chatChunkChoice{ch}, Timings: ch.Timings}
}

// send writes one choice's chunk, after the choice's role chunk.
func (c *chatStreamer) send(ch chatChunkChoice) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.roleOut[ch.Index] {
		c.roleOut[ch.Index] = true
		empty := ""
		if err := c.out.send(c.chunk(chatChunkChoice{Index: ch.Index, Delta: chatDelta{Role: "assistant", Content: &empty}})); err != nil {
			return err
		}
	}
	return c.out.send(c.chunk(ch))
}

// piece turns what an answer made final into a delta chunk.
func piece(i int, p answerPiece, lp *chatLogprobs) chatChunkChoice {
	ch := chatChunkChoice{Index: i, Logprobs: lp, Delta: chatDelta{ToolCalls: p.calls}}
	if p.content != "" {
		ch.Delta.Content = &p.content
	}
	if p.reasoning != "" {
		ch.Delta.ReasoningContent = &p.reasoning
	}
	return ch
}

func (s *Server) streamChat(w http.ResponseWriter, r *http.Request, j *chatJob) string {
	c := &chatStreamer{out: newSSE(w), j: j, roleOut: make([]bool, j.n)}
	answers := make([]*answer, j.n)
	for i := range answers {
		answers[i] = j.newAnswer()
	}
	gens, e := s.runChoices(r.Context(), j, func(i int, d generate.Delta) error {
		var lp *chatLogprobs
		if j.wantLP && d.Token >= 0 {
			lp = &chatLogprobs{Content: []chatTokenLogprob{j.m.chatLogprob(d, j.req.ReturnTokensAsTokenIDs)}}
		}
		p := answers[i].push(d.Text)
		if p.empty() && lp == nil {
			return nil // nothing final yet (a partial character, a possible stop string or markup)
		}
		return c.send(piece(i, p, lp))
	}, func(i int, g *generation) {
		// Each choice ends as soon as it is done, not with the slowest.
		if g.res.FinishReason == engine.FinishCancelled || failed(&g.res) != nil {
			return
		}
		c.finish(i, answers[i], g)
	})
	if e != nil {
		if c.out.started {
			c.out.fail(e)
			return outcomeOf(e)
		}
		return s.reject(w, e)
	}
	for _, g := range gens {
		if g.res.FinishReason == engine.FinishCancelled {
			return outcomeCancelled
		}
		if e := failed(&g.res); e != nil {
			if !c.out.started {
				return s.reject(w, e)
			}
			c.out.fail(e)
			return outcomeError
		}
	}
	if c.err != nil {
		return outcomeCancelled
	}
	reason := answers[0].finish(finishReason(&gens[0].res))
	if j.req.includeUsage() {
		u := sumUsage(gens)
		c.out.send(chatChunk{ID: j.id, Object: "chat.completion.chunk", Created: j.created, Model: j.m.name,
			Choices: []chatChunkChoice{}, Usage: &u})
	}
	c.out.done()
	return reason
}
