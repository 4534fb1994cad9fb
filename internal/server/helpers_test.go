package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/mlxcel/mlxcel/internal/app"
)

const testdata = "../../../shared/testdata/"

// Models are loaded once per directory and shared by the tests' servers
// (one at a time: the tests of this package do not run in parallel).
var (
	modelsMu sync.Mutex
	models   = map[string]*app.Loaded{}
)

// loadModel loads dir ("" is the embedded stories260k) on the CPU backend.
func loadModel(t testing.TB, dir string) *app.Loaded {
	t.Helper()
	modelsMu.Lock()
	defer modelsMu.Unlock()
	if l, ok := models[dir]; ok {
		return l
	}
	l, err := app.Load(app.Options{ModelDir: dir, Backend: "cpu", Threads: 2, Quiet: true})
	if err != nil {
		t.Fatalf("loading %s: %v", dir, err)
	}
	models[dir] = l
	return l
}

func fixture(name string) string { return filepath.Join(testdata, "tiny", name) }

// testServer is a Server on a loopback listener.
type testServer struct {
	*Server
	ts  *httptest.Server
	url string
}

// startServer serves l with o; the server is closed when the test ends.
func startServer(t testing.TB, l *app.Loaded, o Options) *testServer {
	t.Helper()
	s := New(o)
	if l != nil {
		if err := s.Ready(l); err != nil {
			t.Fatal(err)
		}
	}
	ts := httptest.NewUnstartedServer(nil)
	ts.Listener = s.HTTPServer(ts.Config, ts.Listener)
	ts.Start()
	t.Cleanup(func() {
		// Stopping the engine first ends anything still generating, so
		// the listener's Close does not wait on it.
		s.Close()
		ts.Close()
	})
	return &testServer{Server: s, ts: ts, url: ts.URL}
}

// client is an official OpenAI SDK client for the server.
func (s *testServer) client(opts ...option.RequestOption) openai.Client {
	base := []option.RequestOption{
		option.WithBaseURL(s.url + "/v1/"),
		option.WithAPIKey("unused"),
		option.WithMaxRetries(0),
		option.WithHTTPClient(s.ts.Client()),
	}
	return openai.NewClient(append(base, opts...)...)
}

// post sends a raw JSON body and returns the status and decoded body.
func (s *testServer) post(t testing.TB, path string, body any, header ...string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case string:
		rd = bytes.NewBufferString(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest("POST", s.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := s.ts.Client().Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, decodeBody(t, resp.Body)
}

func (s *testServer) get(t testing.TB, path string, header ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest("GET", s.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := s.ts.Client().Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, decodeBody(t, resp.Body)
}

func decodeBody(t testing.TB, r io.Reader) map[string]any {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("response is not a JSON object: %v: %.300s", err, b)
	}
	return m
}

// errorOf returns the "error" member of an OpenAI error body, failing the
// test if the shape is wrong (all four keys present).
func errorOf(t testing.TB, body map[string]any) map[string]any {
	t.Helper()
	e, ok := body["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error object in %v", body)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := e[k]; !ok {
			t.Errorf("error object lacks %q: %v", k, e)
		}
	}
	if m, _ := e["message"].(string); m == "" {
		t.Errorf("error without a message: %v", e)
	}
	return e
}
