package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// ServeOptions configure the load generator.
type ServeOptions struct {
	URL         string // server base URL (or the chat completions endpoint)
	Model       string
	Concurrency []int // levels, run in order
	Requests    int   // requests per level
	// PromptTokens is each prompt's length; SharedPrefixTokens of it are
	// the same in every request (to exercise prefix caching), the rest
	// differs per request.
	PromptTokens       int
	SharedPrefixTokens int
	MaxTokens          int
	// Turns makes each request a conversation of that many turns (default
	// 1): a turn sends the conversation so far, the previous answer as
	// the assistant's message and a new user message of TurnTokens
	// (default 64), as a chat client or an agent does; with prefix caching
	// a follow-up turn's time to first token is that of its new tokens.
	Turns, TurnTokens int
	APIKey            string
	IgnoreEOS         bool
	// ResponseFormat, when set, is every request's response_format (an
	// OpenAI object such as {"type":"json_schema",...}): decoding under a
	// grammar, to compare with the same load unconstrained.
	ResponseFormat json.RawMessage
	// Temperature and TopP are every request's sampling (0 and 0: greedy,
	// the server's default top_p): a sampled load, as chat clients send.
	Temperature, TopP float64
	Timeout           time.Duration // per request
	// Metrics scrapes MetricsURL (default <base>/metrics) before and after
	// each level and reports deltas of series starting with MetricsPrefix.
	Metrics       bool
	MetricsURL    string
	MetricsPrefix string
	// MetricsSettle is waited after a level before the second scrape:
	// servers may record a request's histograms just after its stream
	// ends (default 200ms).
	MetricsSettle time.Duration
	// Encoder, when set, sizes prompts exactly in its tokens; otherwise
	// they are sized by a words-per-token estimate and the server's usage
	// reports the real length.
	Encoder  Encoder
	Progress io.Writer // progress bar target; nil for none
	Log      io.Writer
	Client   *http.Client
}

// LevelResult summarises one concurrency level. Times are milliseconds.
type LevelResult struct {
	Concurrency      int      `json:"concurrency"`
	Requests         int      `json:"requests"`
	Errors           int      `json:"errors"`
	ErrorSamples     []string `json:"error_samples,omitempty"`
	WallS            float64  `json:"wall_s"`
	TTFTMean         float64  `json:"ttft_mean_ms"`
	TTFTP50          float64  `json:"ttft_p50_ms"`
	TTFTP95          float64  `json:"ttft_p95_ms"`
	TTFTP99          float64  `json:"ttft_p99_ms"`
	ITLMean          float64  `json:"itl_mean_ms"`
	ITLP99           float64  `json:"itl_p99_ms"`
	DecodeTokSMean   float64  `json:"request_decode_tok_s_mean"`
	DecodeTokSP50    float64  `json:"request_decode_tok_s_p50"`
	OutputTokS       float64  `json:"output_tok_s"`
	RequestsPerS     float64  `json:"requests_per_s"`
	PromptTokensMean float64  `json:"prompt_tokens_mean"`
	OutputTokens     int      `json:"output_tokens"`
	// Turns > 1: TTFT of the conversations' first turns and of the others.
	Turns            int     `json:"turns"`
	TTFTFirstMean    float64 `json:"ttft_first_turn_mean_ms"`
	TTFTFollowupMean float64 `json:"ttft_followup_mean_ms"`
	Metrics          Samples `json:"metric_deltas,omitempty"`
	MetricsError     string  `json:"metrics_error,omitempty"`
}

func (o *ServeOptions) defaults() {
	if len(o.Concurrency) == 0 {
		o.Concurrency = []int{1, 2, 4, 8}
	}
	if o.Requests <= 0 {
		o.Requests = 16
	}
	if o.PromptTokens <= 0 {
		o.PromptTokens = 512
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = 128
	}
	if o.Turns == 0 {
		o.Turns = 1
	}
	if o.TurnTokens == 0 {
		o.TurnTokens = 64
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.MetricsSettle <= 0 {
		o.MetricsSettle = 200 * time.Millisecond
	}
	if o.MetricsPrefix == "" {
		o.MetricsPrefix = "mlxcel_"
	}
	if o.MetricsURL == "" {
		base := strings.TrimRight(o.URL, "/")
		base = strings.TrimSuffix(base, "/chat/completions")
		base = strings.TrimSuffix(base, "/v1")
		o.MetricsURL = base + "/metrics"
	}
	if o.Client == nil {
		// No overall client timeout: a stream may legitimately last long;
		// each request has its own context deadline instead.
		o.Client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}}
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
}

// RunServe runs every level and returns their summaries. Requests are
// bounded in number (Requests per level) and in time (Timeout each).
func RunServe(ctx context.Context, o ServeOptions) ([]LevelResult, error) {
	o.defaults()
	if o.URL == "" {
		return nil, errors.New("--url is required")
	}
	if o.Turns < 1 || o.Turns > 1 && o.TurnTokens < 1 {
		return nil, fmt.Errorf("--turns %d, --turn-tokens %d: want at least one turn and one token a turn", o.Turns, o.TurnTokens)
	}
	if o.SharedPrefixTokens >= o.PromptTokens {
		return nil, fmt.Errorf("--shared-prefix-tokens %d must be less than --prompt-tokens %d", o.SharedPrefixTokens, o.PromptTokens)
	}
	for _, c := range o.Concurrency {
		if c <= 0 {
			return nil, fmt.Errorf("concurrency %d must be positive", c)
		}
	}
	prompts, err := buildServePrompts(o)
	if err != nil {
		return nil, err
	}
	if o.Model == "" {
		// Servers that check the model field want a name they serve; ask.
		if o.Model, err = firstModel(ctx, o.Client, o.URL, o.APIKey, min(o.Timeout, 10*time.Second)); err != nil {
			fmt.Fprintf(o.Log, "no --model and %v; sending an empty model name\n", err)
		} else {
			fmt.Fprintf(o.Log, "model: %s (from /v1/models)\n", o.Model)
		}
	}
	cl := &client{http: o.Client, url: chatURL(o.URL), apiKey: o.APIKey, model: o.Model, maxTokens: o.MaxTokens, ignoreEOS: o.IgnoreEOS,
		format: o.ResponseFormat, temp: o.Temperature, topP: o.TopP}
	var out []LevelResult
	for li, c := range o.Concurrency {
		var before Samples
		var mErr error
		if o.Metrics {
			before, mErr = scrapeMetrics(ctx, o.Client, o.MetricsURL, o.APIKey, o.MetricsPrefix)
		}
		// Each level gets fresh prompts (offset by level) so a prefix cache
		// only ever helps with the declared shared prefix.
		results, wall := runLevel(ctx, cl, prompts[li], c, o)
		l := summarise(c, results, wall)
		l.Turns = o.Turns
		if o.Metrics {
			var after Samples
			if mErr == nil {
				time.Sleep(o.MetricsSettle)
				after, mErr = scrapeMetrics(ctx, o.Client, o.MetricsURL, o.APIKey, o.MetricsPrefix)
			}
			if mErr != nil {
				l.MetricsError = mErr.Error()
				fmt.Fprintf(o.Log, "metrics: %v\n", mErr)
			} else {
				l.Metrics = delta(before, after)
			}
		}
		out = append(out, l)
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
	}
	return out, nil
}

// runLevel runs the level's conversations, conc at a time, and returns
// every turn's result (conversation i's turn k at i*Turns+k).
func runLevel(ctx context.Context, cl *client, convs []conversation, conc int, o ServeOptions) ([]RequestResult, time.Duration) {
	var bar *progressbar.ProgressBar
	if o.Progress != nil {
		bar = progressbar.NewOptions(len(convs)*o.Turns, progressbar.OptionSetWriter(o.Progress),
			progressbar.OptionSetDescription(fmt.Sprintf("concurrency %d", conc)), progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(30), progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(100*time.Millisecond))
	}
	jobs := make(chan int)
	results := make([]RequestResult, len(convs)*o.Turns)
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				msgs := []chatMessage{{Role: "user", Content: convs[i].first}}
				for k := range o.Turns {
					r := &results[i*o.Turns+k]
					if k > 0 {
						if prev := results[i*o.Turns+k-1]; prev.Err != nil {
							*r = RequestResult{Turn: k, Err: fmt.Errorf("turn %d not sent: turn %d failed", k+1, k)}
							continue
						}
						msgs = append(msgs, chatMessage{Role: "assistant", Content: results[i*o.Turns+k-1].Reply},
							chatMessage{Role: "user", Content: convs[i].next[k-1]})
					}
					rctx, cancel := context.WithTimeout(ctx, o.Timeout)
					*r = cl.do(rctx, msgs)
					r.Turn = k
					cancel()
					if bar != nil {
						bar.Add(1)
					}
				}
			}
		}()
	}
	for i := range convs {
		if ctx.Err() != nil {
			for k := range o.Turns {
				results[i*o.Turns+k] = RequestResult{Turn: k, Err: ctx.Err()}
			}
			continue
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if bar != nil {
		bar.Finish()
	}
	return results, time.Since(start)
}

func summarise(conc int, rs []RequestResult, wall time.Duration) LevelResult {
	l := LevelResult{Concurrency: conc, Requests: len(rs), WallS: wall.Seconds()}
	var ttft, itl, dec, prompt, first, followup []float64
	for _, r := range rs {
		if r.Err != nil {
			l.Errors++
			if len(l.ErrorSamples) < 3 {
				l.ErrorSamples = append(l.ErrorSamples, r.Err.Error())
			}
			continue
		}
		ttft = append(ttft, ms(r.TTFT))
		if r.Turn == 0 {
			first = append(first, ms(r.TTFT))
		} else {
			followup = append(followup, ms(r.TTFT))
		}
		for _, g := range r.Gaps {
			itl = append(itl, ms(g))
		}
		if d := r.DecodeTokS(); d > 0 {
			dec = append(dec, d)
		}
		if r.Prompt > 0 {
			prompt = append(prompt, float64(r.Prompt))
		}
		l.OutputTokens += r.Completion
	}
	l.TTFTMean, l.TTFTP50, l.TTFTP95, l.TTFTP99 = mean(ttft), percentile(ttft, 50), percentile(ttft, 95), percentile(ttft, 99)
	l.ITLMean, l.ITLP99 = mean(itl), percentile(itl, 99)
	l.DecodeTokSMean, l.DecodeTokSP50 = mean(dec), percentile(dec, 50)
	l.PromptTokensMean = mean(prompt)
	l.TTFTFirstMean, l.TTFTFollowupMean = mean(first), mean(followup)
	if s := wall.Seconds(); s > 0 {
		l.OutputTokS = float64(l.OutputTokens) / s
		l.RequestsPerS = float64(l.Requests-l.Errors) / s
	}
	return l
}

// percentile interpolates linearly between closest ranks (numpy's
// default), so p50 of an even count is the mean of the middle two.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	pos := p / 100 * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(s)-1)
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}

// wordsPerToken converts a token budget to corpus words when no tokenizer
// is given: English prose of common words runs about 1.3 tokens per word
// in the Llama 3 / Qwen vocabularies.
const wordsPerToken = 0.75

// conversation is one request's first prompt and, with Turns > 1, the
// user messages of its later turns.
type conversation struct {
	first string
	next  []string
}

// buildServePrompts makes Requests conversations for each level: a first
// prompt of a shared prefix (identical in every request of every level)
// followed by a part unique to the request, together about PromptTokens
// long, and Turns-1 further user messages of about TurnTokens, unique too.
func buildServePrompts(o ServeOptions) ([][]conversation, error) {
	words := strings.Fields(Corpus)
	prefix, err := fitWords(o.Encoder, func(n int) string { return repeatWords(words, 0, n) }, o.SharedPrefixTokens, o.SharedPrefixTokens)
	if err != nil {
		return nil, err
	}
	out := make([][]conversation, len(o.Concurrency))
	for li := range o.Concurrency {
		for i := range o.Requests {
			id := li*o.Requests + i
			// The unique part starts with the request id and then walks the
			// corpus from an id-dependent word, so no two requests share
			// more than the declared prefix.
			head := fmt.Sprintf("Request %d.", id)
			mk := func(n int) string {
				return strings.TrimSpace(prefix + " " + head + " " + repeatWords(words, 7*id+1, n))
			}
			p, err := fitWords(o.Encoder, mk, o.PromptTokens, o.PromptTokens-o.SharedPrefixTokens)
			if err != nil {
				return nil, err
			}
			c := conversation{first: p}
			for k := 1; k < o.Turns; k++ {
				head := fmt.Sprintf("Turn %d of request %d.", k+1, id)
				mk := func(n int) string { return head + " " + repeatWords(words, 13*id+101*k+3, n) }
				m, err := fitWords(o.Encoder, mk, o.TurnTokens, o.TurnTokens)
				if err != nil {
					return nil, err
				}
				c.next = append(c.next, m)
			}
			out[li] = append(out[li], c)
		}
	}
	return out, nil
}

func repeatWords(words []string, from, n int) string {
	if n <= 0 {
		return ""
	}
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[(from+i)%len(words)])
	}
	return b.String()
}

// fitWords finds the word count n whose text mk(n) is closest to target
// tokens without exceeding it, by binary search with an Encoder; without
// one it takes estTarget tokens' worth of words (estTarget is the part of
// the target that mk's words make up, the rest being fixed text).
func fitWords(enc Encoder, mk func(n int) string, target, estTarget int) (string, error) {
	if target <= 0 {
		return "", nil
	}
	if enc == nil {
		return mk(max(1, int(float64(estTarget)*wordsPerToken))), nil
	}
	count := func(n int) (int, error) {
		ids, err := enc.Encode(mk(n), false)
		return len(ids), err
	}
	lo, hi := 0, max(1, target) // mk(hi) has at least target tokens: each word is >= 1 token
	for lo < hi {
		mid := (lo + hi + 1) / 2
		n, err := count(mid)
		if err != nil {
			return "", err
		}
		if n <= target {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return mk(max(lo, 1)), nil
}
