package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/mlxcel/mlxcel/internal/model/synthetic"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"
)

// PrintServeTable writes one line per level, then the metric deltas.
func PrintServeTable(w io.Writer, ls []LevelResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "conc\treqs\terrors\tTTFT mean\tp50\tp95\tp99 ms\tITL mean\tp99 ms\treq tok/s\tout tok/s\treq/s\tprompt tok\t")
	for _, l := range ls {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.2f\t%.2f\t%.1f\t%.1f\t%.2f\t%.0f\t\n", l.Concurrency, l.Requests, l.Errors,
			l.TTFTMean, l.TTFTP50, l.TTFTP95, l.TTFTP99, l.ITLMean, l.ITLP99, l.DecodeTokSMean, l.OutputTokS, l.RequestsPerS, l.PromptTokensMean)
	}
	tw.Flush()
	for _, l := range ls {
		if l.Turns > 1 {
			fmt.Fprintf(w, "concurrency %d, %d-turn conversations: TTFT mean %.1f ms on first turns, %.1f ms on follow-ups\n",
				l.Concurrency, l.Turns, l.TTFTFirstMean, l.TTFTFollowupMean)
		}
	}
	for _, l := range ls {
		for _, e := range l.ErrorSamples {
			fmt.Fprintf(w, "concurrency %d error: %s\n", l.Concurrency, e)
		}
		if l.MetricsError != "" {
			fmt.Fprintf(w, "concurrency %d metrics: %s\n", l.Concurrency, l.MetricsError)
		}
		if len(l.Metrics) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nserver metric deltas at concurrency %d:\n", l.Concurrency)
		keys := make([]string, 0, len(l.Metrics))
		unchanged := 0
		for k, v := range l.Metrics {
			// Series that did not move (error outcomes, preemptions on a
			// healthy run) are counted, not listed.
			if v == 0 {
				unchanged++
				continue
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		mw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, k := range keys {
			fmt.Fprintf(mw, "  %s\t%s\n", k, strconv.FormatFloat(l.Metrics[k], 'g', 8, 64))
		}
		mw.Flush()
		if unchanged > 0 {
			fmt.Fprintf(w, "  (%d series unchanged)\n", unchanged)
		}
	}
}

// serveCSVColumns are the per-level columns of --out FILE.csv.
var serveCSVColumns = []string{"concurrency", "requests", "errors", "wall_s", "ttft_mean_ms", "ttft_p50_ms", "ttft_p95_ms",
	"ttft_p99_ms", "itl_mean_ms", "itl_p99_ms", "request_decode_tok_s_mean", "request_decode_tok_s_p50", "output_tok_s",
	"requests_per_s", "prompt_tokens_mean", "output_tokens", "turns", "ttft_first_turn_mean_ms", "ttft_followup_mean_ms"}

// ServeReport is the JSON written by --out FILE.json.
type ServeReport struct {
	URL                string        `json:"url"`
	Model              string        `json:"model"`
	Date               string        `json:"date"`
	PromptTokens       int           `json:"prompt_tokens"`
	SharedPrefixTokens int           `json:"shared_prefix_tokens"`
	MaxTokens          int           `json:"max_tokens"`
	Turns              int           `json:"turns"`
	TurnTokens         int           `json:"turn_tokens"`
	RequestsPerLevel   int           `json:"requests_per_level"`
	Version            string        `json:"mlxcel_version"`
	Levels             []LevelResult `json:"levels"`
}

// writeServeOut writes the levels as JSON or CSV, by the extension.
func writeServeOut(path string, rep ServeReport) error {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(path, append(b, '\n'), 0o644)
	case ".csv":
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		cw := csv.NewWriter(f)
		cw.Write(serveCSVColumns)
		g := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
		for _, l := range rep.Levels {
			cw.Write([]string{strconv.Itoa(l.Concurrency), strconv.Itoa(l.Requests), strconv.Itoa(l.Errors), g(l.WallS),
				g(l.TTFTMean), g(l.TTFTP50), g(l.TTFTP95), g(l.TTFTP99), g(l.ITLMean), g(l.ITLP99), g(l.DecodeTokSMean),
				g(l.DecodeTokSP50), g(l.OutputTokS), g(l.RequestsPerS), g(l.PromptTokensMean), strconv.Itoa(l.OutputTokens),
				strconv.Itoa(l.Turns), g(l.TTFTFirstMean), g(l.TTFTFollowupMean)})
		}
		cw.Flush()
		if err := cw.Error(); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	return fmt.Errorf("--out %s: use a .json or .csv file name", path)
}

// servePanels plots aggregate output tok/s and TTFT (p50, p95) against
// concurrency: where throughput stops growing while TTFT climbs is the
// server's useful concurrency.
func servePanels(ls []LevelResult) []panel {
	var tok, p50, p95 []point
	for _, l := range ls {
		if l.Requests == l.Errors {
			continue
		}
		x := float64(l.Concurrency)
		tok = append(tok, point{x, l.OutputTokS})
		p50 = append(p50, point{x, l.TTFTP50})
		p95 = append(p95, point{x, l.TTFTP95})
	}
	return []panel{
		{Title: "Aggregate output throughput", XLabel: "concurrent requests", YLabel: "output tok/s", LogX: true,
			Series: []series{{Name: "output tok/s", Points: tok}}},
		{Title: "Time to first token", XLabel: "concurrent requests", YLabel: "TTFT ms", LogX: true,
			Series: []series{{Name: "p50", Points: p50}, {Name: "p95", Points: p95}}},
	}
}

// ServeMain is `mlxcel bench serve`.
func ServeMain(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench serve", stderr, "mlxcel bench serve --url http://127.0.0.1:8080 --model NAME [flags]")
	var o ServeOptions
	conc := intList{1, 2, 4, 8}
	fs.StringVar(&o.URL, "url", "http://127.0.0.1:8080", "server base URL (…/v1/chat/completions is added) or the endpoint itself")
	fs.StringVar(&o.Model, "model", "", "model name sent in each request (default: the first of the server's /v1/models)")
	fs.Var(&conc, "concurrency", "comma-separated concurrency levels")
	fs.IntVar(&o.Requests, "requests", 16, "requests per level")
	fs.IntVar(&o.PromptTokens, "prompt-tokens", 512, "prompt length in tokens (approximate without --tokenizer; the server's usage gives the real count)")
	fs.IntVar(&o.SharedPrefixTokens, "shared-prefix-tokens", 0, "leading prompt tokens shared by every request (prefix-cache workload)")
	fs.IntVar(&o.MaxTokens, "max-tokens", 128, "tokens to generate per request")
	fs.IntVar(&o.Turns, "turns", 1, "turns a conversation: each later turn sends the conversation so far, the answer and a new user message (prefix-cache workload of chat clients and agents)")
	fs.IntVar(&o.TurnTokens, "turn-tokens", 64, "tokens of each later turn's new user message")
	fs.StringVar(&o.APIKey, "api-key", os.Getenv("OPENAI_API_KEY"), "bearer token (default $OPENAI_API_KEY)")
	fs.BoolVar(&o.IgnoreEOS, "ignore-eos", true, "ask the server to generate max-tokens regardless of EOS (ignore_eos; turn off for servers that reject it)")
	fs.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "per-request timeout")
	fs.Float64Var(&o.Temperature, "temperature", 0, "every request's temperature (0: greedy; chat clients typically send 0.6-1)")
	fs.Float64Var(&o.TopP, "top-p", 0, "every request's top_p (0: not sent, the server's default)")
	format := fs.String("response-format", "", "every request's response_format: json_object, an OpenAI response_format object as JSON, or @FILE holding one (constrained decoding under load)")
	fs.BoolVar(&o.Metrics, "metrics", false, "scrape the server's /metrics before and after each level and show deltas")
	fs.StringVar(&o.MetricsURL, "metrics-url", "", "metrics endpoint (default <url>/metrics)")
	fs.DurationVar(&o.MetricsSettle, "metrics-settle", 200*time.Millisecond, "wait after a level before scraping metrics again")
	fs.StringVar(&o.MetricsPrefix, "metrics-prefix", "mlxcel_", "metric name prefix whose counters and histograms are compared")
	tok := fs.String("tokenizer", "", "tokenizer folder or shared name to size prompts exactly")
	out := fs.String("out", "", "write per-level results to FILE.json or FILE.csv")
	chart := fs.String("chart", "", "write a chart of output tok/s and TTFT against concurrency (FILE.svg or FILE.png)")
	quiet := fs.Bool("quiet", false, "no progress bar")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	o.Concurrency = conc
	o.Log = stderr
	if *format != "" {
		f, err := parseResponseFormat(*format)
		if err != nil {
			return err
		}
		o.ResponseFormat = f
	}
	if *tok != "" {
		dir, err := synthetic.FindTokenizer(*tok)
		if err != nil {
			return err
		}
		if o.Encoder, err = LoadTokenizer(dir); err != nil {
			return err
		}
	}
	// The bar only when a person is watching: a log file or CI output
	// would fill with carriage-return redraws.
	if f, ok := stderr.(*os.File); ok && !*quiet && term.IsTerminal(int(f.Fd())) {
		o.Progress = stderr
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	levels, runErr := RunServe(ctx, o)
	if len(levels) > 0 {
		PrintServeTable(stdout, levels)
	}
	if *out != "" && len(levels) > 0 {
		rep := ServeReport{URL: o.URL, Model: o.Model, Date: time.Now().UTC().Format(time.RFC3339), PromptTokens: o.PromptTokens,
			SharedPrefixTokens: o.SharedPrefixTokens, MaxTokens: o.MaxTokens, Turns: max(o.Turns, 1), TurnTokens: o.TurnTokens, RequestsPerLevel: o.Requests, Version: Version(), Levels: levels}
		if err := writeServeOut(*out, rep); err != nil {
			return err
		}
	}
	if *chart != "" && len(levels) > 0 {
		if err := saveFigure(*chart, servePanels(levels)); err != nil {
			return err
		}
	}
	if runErr != nil {
		return runErr
	}
	var failed int
	for _, l := range levels {
		failed += l.Errors
	}
	if failed > 0 {
		return fmt.Errorf("%d request(s) failed", failed)
	}
	return nil
}

// parseResponseFormat reads --response-format: "json_object", a JSON
// object, or @FILE holding one.
func parseResponseFormat(v string) (json.RawMessage, error) {
	switch {
	case v == "json_object":
		return json.RawMessage(`{"type":"json_object"}`), nil
	case strings.HasPrefix(v, "@"):
		b, err := os.ReadFile(v[1:])
		if err != nil {
			return nil, fmt.Errorf("--response-format: %v", err)
		}
		v = string(b)
	}
	var probe map[string]any
	if err := json.Unmarshal([]byte(v), &probe); err != nil {
		return nil, fmt.Errorf("--response-format: not json_object or a JSON object: %v", err)
	}
	if _, ok := probe["type"].(string); !ok {
		return nil, fmt.Errorf(`--response-format: the object has no "type" (want {"type":"json_schema",...} or json_object)`)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(v)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
