package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestPrometheusScrape runs a real Prometheus server against the server:
// it scrapes /metrics every second while a load runs, and its query API
// must see the histograms: a TTFT median, and as many TTFT and decode
// rate observations as requests completed.
func TestPrometheusScrape(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("the prometheus binary is not installed: run scripts/test.sh, which installs Debian's prometheus package")
	}
	s := startServer(t, loadModel(t, ""), Options{Parallel: 4})
	target := strings.TrimPrefix(s.url, "http://")

	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: mlxcel
    static_configs:
      - targets: ['%s']
`, target)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	promAddr := freeAddr(t)
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	logf, _ := os.Create(filepath.Join(dir, "prometheus.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("prometheus log:\n%s", b)
		}
	})
	prom := "http://" + promAddr

	// A scrape before the load gives rate() its starting point.
	pollQuery(t, prom, `up{job="mlxcel"}`, 30*time.Second, func(v float64) bool { return v == 1 })

	const n = 24
	c := s.client()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			ctx := context.Background()
			extra := option.WithJSONSet("ignore_eos", true)
			switch i % 3 {
			case 0:
				_, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "stories260k",
					Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")}, MaxTokens: openai.Int(16)}, extra)
				errs <- err
			case 1:
				_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "stories260k",
					Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("The dog")}, MaxTokens: openai.Int(16)}, extra)
				errs <- err
			default:
				stream := c.Completions.NewStreaming(ctx, openai.CompletionNewParams{Model: "stories260k",
					Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Tom and Sue")}, MaxTokens: openai.Int(16)}, extra)
				for stream.Next() {
				}
				errs <- stream.Err()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	const wait = 30 * time.Second
	for _, q := range []string{"mlxcel_request_ttft_ms_count", "mlxcel_request_decode_tok_s_count", `mlxcel_requests_total{outcome="length"}`} {
		pollQuery(t, prom, q, wait, func(v float64) bool { return v == n })
	}
	median := pollQuery(t, prom, `histogram_quantile(0.5, rate(mlxcel_request_ttft_ms_bucket[1m]))`, wait,
		func(v float64) bool { return !math.IsNaN(v) })
	p50 := pollQuery(t, prom, `histogram_quantile(0.5, rate(mlxcel_request_decode_tok_s_bucket[1m]))`, wait,
		func(v float64) bool { return !math.IsNaN(v) })
	t.Logf("Prometheus sees TTFT p50 %.1f ms, decode p50 %.0f tok/s over %d requests", median, p50, n)
	if median <= 0 || median > ttftBuckets[len(ttftBuckets)-1] {
		t.Errorf("TTFT median %v out of the buckets' range", median)
	}
	// The gauges an inference gateway reads are there too.
	for _, q := range []string{"mlxcel_num_requests_waiting", "mlxcel_num_requests_running", "mlxcel_kv_cache_usage_ratio"} {
		pollQuery(t, prom, q, wait, func(v float64) bool { return v == 0 })
	}
}

// pollQuery runs an instant query until its single result satisfies ok,
// and returns that value; it fails the test after timeout.
func pollQuery(t *testing.T, prom, query string, timeout time.Duration, ok func(float64) bool) float64 {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := "no answer"
	for {
		v, err := promQuery(prom, query)
		if err == nil && ok(v) {
			return v
		}
		if err != nil {
			last = err.Error()
		} else {
			last = strconv.FormatFloat(v, 'g', -1, 64)
		}
		if time.Now().After(deadline) {
			t.Fatalf("query %s: last answer %s after %v", query, last, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func promQuery(prom, query string) (float64, error) {
	resp, err := http.Get(prom + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, err
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("%s: %s", r.Status, r.Error)
	}
	if len(r.Data.Result) != 1 {
		return 0, fmt.Errorf("%d series", len(r.Data.Result))
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	return strconv.ParseFloat(s, 64)
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
