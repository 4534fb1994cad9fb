package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkStalledConnections is the figure of docs/server.md: 20,000
// connections that send headers (Content-Length: 100) and no body, against
// the default limits. It reports how many the server kept open, how many
// it shed, /health latency meanwhile, the RSS growth, and when the kept
// ones were closed by the 60 s body deadline. Run it alone:
//
//	go test -run '^$' -bench BenchmarkStalledConnections -benchtime 1x ./internal/server/
func BenchmarkStalledConnections(b *testing.B) {
	s := startServer(b, loadModel(b, ""), Options{})
	addr := strings.TrimPrefix(s.url, "http://")
	debug.FreeOSMemory()
	base := rssBytes(b)
	start := time.Now()

	var mu sync.Mutex
	var kept []time.Duration // when each kept connection was closed
	shed, failed := 0, 0
	var wg sync.WaitGroup
	var health []time.Duration
	var healthErrs []string
	stopHealth := make(chan struct{})
	// A fresh connection per probe, as a load balancer's: a kept-alive
	// one would be the idle connection the cap reclaims first.
	probe := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	go func() {
		for {
			select {
			case <-stopHealth:
				return
			case <-time.After(100 * time.Millisecond):
			}
			t0 := time.Now()
			resp, err := probe.Get(s.url + "/health")
			d := time.Since(t0)
			if err != nil || resp.StatusCode != 200 {
				d = time.Hour // counted as never answered
				mu.Lock()
				healthErrs = append(healthErrs, fmt.Sprint(err, resp != nil && resp.StatusCode != 200))
				mu.Unlock()
			} else {
				resp.Body.Close()
			}
			mu.Lock()
			health = append(health, d)
			mu.Unlock()
		}
	}()
	var peak int64
	for i := range 20000 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			failed++
			continue
		}
		fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
		wg.Go(func() {
			defer c.Close()
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			mu.Lock()
			defer mu.Unlock()
			if err == nil && resp.StatusCode == http.StatusRequestTimeout {
				kept = append(kept, time.Since(start))
			} else {
				shed++
			}
			if err == nil {
				io.Copy(io.Discard, resp.Body)
			}
		})
		if i%1000 == 999 {
			peak = max(peak, rssBytes(b)-base)
		}
	}
	opened := time.Since(start)
	peak = max(peak, rssBytes(b)-base)
	wg.Wait()
	close(stopHealth)
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(health)
	slices.Sort(kept)
	p := func(q float64) time.Duration { return health[min(len(health)-1, int(q*float64(len(health))))] }
	b.ReportMetric(float64(len(kept)), "kept")
	b.ReportMetric(float64(shed), "shed")
	b.ReportMetric(float64(failed), "dial-failed")
	b.ReportMetric(float64(peak>>20), "rss-growth-MB")
	b.ReportMetric(float64(p(0.5).Milliseconds()), "health-p50-ms")
	b.ReportMetric(float64(health[len(health)-1].Milliseconds()), "health-max-ms")
	if len(kept) > 0 {
		b.ReportMetric(kept[len(kept)-1].Seconds(), "last-closed-s")
	}
	b.Logf("/health failures: %d %q", len(healthErrs), healthErrs[:min(5, len(healthErrs))])
	b.Logf("opened 20000 in %v; kept %d (closed by 408 between %v and %v), shed %d, dial failures %d; /health p50 %v max %v over %d probes; RSS +%d MB",
		opened.Round(time.Millisecond), len(kept), kept[0].Round(time.Millisecond), kept[len(kept)-1].Round(time.Millisecond),
		shed, failed, p(0.5), health[len(health)-1], len(health), peak>>20)
}
