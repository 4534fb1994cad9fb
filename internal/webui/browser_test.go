package webui_test

import (
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mlxcel/mlxcel/internal/app"
	"github.com/mlxcel/mlxcel/internal/server"
)

// scripts/test.sh installs chromium and playwright-core and passes
// -require-browser, so there a missing browser fails the test; a plain
// `go test` skips it with the reason.
var requireBrowser = flag.Bool("require-browser", false, "fail (not skip) the browser test when chromium, node or playwright-core is missing")

const webDir = "../../test/web"

func browserTools(t *testing.T) (node, chromium string) {
	t.Helper()
	missing := func(what string) {
		msg := what + " not found: scripts/test.sh installs it (apt-get install chromium nodejs npm; npm ci in test/web)"
		if *requireBrowser {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node")
	}
	chromium = "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		if chromium, err = exec.LookPath("chromium"); err != nil {
			missing("chromium")
		}
	}
	if _, err := os.Stat(filepath.Join(webDir, "node_modules", "playwright-core")); err != nil {
		missing("playwright-core (test/web/node_modules)")
	}
	return node, chromium
}

// slowStream paces the chat stream, 20 ms a write, so the browser sees
// the answer grow and can press Stop while the embedded model (thousands
// of tokens a second) is still answering.
func slowStream(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" {
			w = &slowWriter{w}
		}
		next.ServeHTTP(w, r)
	})
}

type slowWriter struct{ http.ResponseWriter }

func (w *slowWriter) Write(b []byte) (int, error) {
	time.Sleep(20 * time.Millisecond)
	return w.ResponseWriter.Write(b)
}

func (w *slowWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// The chat page in a real headless browser against the server with the
// embedded model and an API key: type a message, see the answer stream
// and its speed, keep it across a reload, stop a generation (the server
// counts the request cancelled), render markdown and fold the thought.
func TestChatPageInBrowser(t *testing.T) {
	node, chromium := browserTools(t)
	l, err := app.Load(app.Options{Backend: "cpu", Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Model.Backend().Close()
	s := server.New(server.Options{APIKey: "secret-key", Parallel: 2, MaxQueue: 4})
	if err := s.Ready(l); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ts := httptest.NewServer(slowStream(s.Handler()))
	defer ts.Close()

	cmd := exec.Command(node, "chat.mjs", ts.URL, "secret-key", chromium)
	cmd.Dir = webDir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var seen struct {
		OK                                   bool
		Error, Model, Answer, Speed, Stopped string
	}
	if jerr := json.Unmarshal(out, &seen); jerr != nil || err != nil || !seen.OK {
		t.Fatalf("browser run: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	if !strings.Contains(seen.Model, "stories260k") || strings.TrimSpace(seen.Answer) == "" || strings.TrimSpace(seen.Stopped) == "" {
		t.Errorf("saw %+v", seen)
	}
	if !regexp.MustCompile(`^\d+ tokens · [\d.]+ tok/s`).MatchString(seen.Speed) {
		t.Errorf("speed %q", seen.Speed)
	}
	if n := cancelled(t, ts.URL); n != 1 {
		t.Errorf("the server counted %d cancelled requests, want 1 (the stopped one)", n)
	}
}

// cancelled reads mlxcel_requests_total{outcome="cancelled"} (retrying
// while the aborted request's handler finishes).
func cancelled(t *testing.T, url string) int {
	re := regexp.MustCompile(`mlxcel_requests_total\{outcome="cancelled"\} (\d+)`)
	n := 0
	for range 50 {
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if m := re.FindSubmatch(b); m != nil {
			if n, _ = strconv.Atoi(string(m[1])); n > 0 {
				return n
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return n
}
