package webui_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/server"
)

// The page and its assets are served without the API key; the API keeps
// requiring it, and other paths still reach the API's 404.
func TestServedBehindAPIKey(t *testing.T) {
	s := server.New(server.Options{APIKey: "k", Parallel: 1})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	get := func(path string) (*http.Response, string) {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := get("/")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(body, `<script src="/ui/app.js"`) || !strings.Contains(body, `id="api-key"`) {
		t.Errorf("/: %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), body[:min(len(body), 200)])
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("no script policy: %q", csp)
	}
	for path, want := range map[string]string{"/ui/app.js": "text/javascript", "/ui/markdown.js": "text/javascript", "/ui/style.css": "text/css"} {
		resp, body := get(path)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), want) || len(body) < 500 {
			t.Errorf("%s: %d %s, %d bytes", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
	}
	if resp, _ := get("/ui/nope.js"); resp.StatusCode != 404 {
		t.Errorf("missing asset: %d", resp.StatusCode)
	}
	if resp, _ := get("/v1/models"); resp.StatusCode != 401 {
		t.Errorf("/v1/models without the key: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest("POST", ts.URL+"/", strings.NewReader("{}"))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Errorf("POST / must not reach the page: %v %v", resp.StatusCode, err)
	}
}
