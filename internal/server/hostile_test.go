package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// rawConn is a hand-driven HTTP/1.1 client connection, for clients that
// misbehave on purpose.
type rawConn struct {
	net.Conn
	rd *bufio.Reader
}

func dialRaw(t testing.TB, s *testServer) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{Conn: c, rd: bufio.NewReader(c)}
}

func (c *rawConn) send(t testing.TB, format string, args ...any) {
	t.Helper()
	if _, err := fmt.Fprintf(c, format, args...); err != nil {
		t.Fatal(err)
	}
}

// response reads one response within d.
func (c *rawConn) response(t testing.TB, d time.Duration) (*http.Response, string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(c.rd, nil)
	if err != nil {
		t.Fatalf("no response within %v: %v", d, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// closedWithin reports whether the server closes the connection within d.
func (c *rawConn) closedWithin(d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c.rd)
	var ne net.Error
	return !errors.As(err, &ne) || !ne.Timeout() // EOF or a reset: closed by the peer
}

// stallBody sends a request's headers with a body that never comes.
func (c *rawConn) stallBody(t testing.TB, path string, headers ...string) {
	t.Helper()
	c.send(t, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n%s\r\n{\"pro",
		path, strings.Join(headers, ""))
}

// TestStalledBodyClosed: a client that sends headers and then stops is
// answered 408 and disconnected after the stall timeout.
func TestStalledBodyClosed(t *testing.T) {
	s := startServer(t, loadModel(t, ""), Options{StallTimeout: 300 * time.Millisecond})
	c := dialRaw(t, s)
	start := time.Now()
	c.stallBody(t, "/v1/completions")
	resp, body := c.response(t, 3*time.Second)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, "request_timeout") {
		t.Fatalf("stalled body: %d %s, want 408 request_timeout", resp.StatusCode, body)
	}
	if !c.closedWithin(time.Second) {
		t.Error("the connection stayed open after the 408")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v for a 300ms stall timeout", d)
	}
	waitFor(t, func() bool { return s.InFlight() == 0 })
}

// TestAuthBeforeBody: with an API key, a request without one gets its 401
// at once, without waiting for a body that never comes.
func TestAuthBeforeBody(t *testing.T) {
	s := startServer(t, loadModel(t, ""), Options{APIKey: "k", StallTimeout: 30 * time.Second})
	c := dialRaw(t, s)
	c.stallBody(t, "/v1/chat/completions")
	resp, body := c.response(t, 2*time.Second)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "invalid_api_key") {
		t.Fatalf("%d %s, want 401", resp.StatusCode, body)
	}
	if !c.closedWithin(time.Second) {
		t.Error("the connection stayed open after the 401 of an unread body")
	}
}

// smallBuffers shrinks the socket buffers of accepted connections, so a
// client that does not read blocks the server's writes after a few KB.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(2048)
	}
	return c, err
}

// TestStreamWriteStall: a streaming client that stops reading is cut after
// the stall timeout; its request is cancelled (slot and KV freed), the
// handler returns and the stall is counted.
func TestStreamWriteStall(t *testing.T) {
	s := New(Options{StallTimeout: 400 * time.Millisecond, Parallel: 2})
	if err := s.Ready(loadModel(t, "")); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(nil)
	ts.Listener = s.HTTPServer(ts.Config, smallBuffers{ts.Listener})
	ts.Start()
	t.Cleanup(func() { s.Close(); ts.Close() })
	srv := &testServer{Server: s, ts: ts, url: ts.URL}

	d := net.Dialer{Control: nil}
	c, err := d.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(2048)
	body := `{"prompt":"Once","max_tokens":500,"ignore_eos":true,"stream":true,"logprobs":5}`
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	// Never read. The engine must let the request go and the handler end.
	waitFor(t, func() bool { return counterValue(t, s.metrics.writeStalls) == 1 })
	waitFor(t, func() bool {
		st := srv.Engine().Stats()
		return st.Running == 0 && st.Waiting == 0 && s.InFlight() == 0
	})
	if st := srv.Engine().Stats(); st.KVUsage != 0 {
		t.Errorf("KV usage %v after the stalled stream was cut", st.KVUsage)
	}
	if n := counterValue(t, s.metrics.requests.WithLabelValues(outcomeCancelled)); n != 1 {
		t.Errorf("cancelled requests %v, want 1", n)
	}
}

// TestConnCap: past MaxConns, /health is still answered while other
// requests get 503 and their connections are closed; an idle keep-alive
// connection is reclaimed for a new client first.
func TestConnCap(t *testing.T) {
	s := startServer(t, loadModel(t, ""), Options{MaxConns: 3, StallTimeout: 30 * time.Second})
	for range 3 {
		dialRaw(t, s).stallBody(t, "/v1/completions")
	}
	waitFor(t, func() bool { n, _ := s.conns.open(); return n == 3 && s.InFlight() == 3 })
	c := dialRaw(t, s)
	c.send(t, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, body := c.response(t, time.Second); resp.StatusCode != 200 {
		t.Fatalf("/health past the cap: %d %s", resp.StatusCode, body)
	}
	c = dialRaw(t, s)
	c.send(t, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
	resp, body := c.response(t, time.Second)
	if resp.StatusCode != 503 || !strings.Contains(body, "too_many_connections") || !resp.Close {
		t.Fatalf("past the cap: %d %v %s, want 503 too_many_connections with Connection: close", resp.StatusCode, resp.Header, body)
	}
	if !c.closedWithin(time.Second) {
		t.Error("overflow connection left open")
	}
}

func TestConnCapReclaimsIdle(t *testing.T) {
	s := startServer(t, loadModel(t, ""), Options{MaxConns: 2})
	idle := []*rawConn{dialRaw(t, s), dialRaw(t, s)}
	for i, c := range idle {
		c.send(t, "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, _ := c.response(t, time.Second); resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
		// The server marks a connection idle after the client has its
		// answer: wait, so that idle[0] is the older idle one.
		waitFor(t, func() bool { return idleConns(s.conns) == i+1 })
	}
	waitFor(t, func() bool { n, _ := s.conns.open(); return n == 2 })
	c := dialRaw(t, s)
	c.send(t, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 32\r\n\r\n{\"prompt\":\"Once\",\"max_tokens\":2}")
	if resp, body := c.response(t, 2*time.Second); resp.StatusCode != 200 {
		t.Fatalf("with idle connections to reclaim: %d %s", resp.StatusCode, body)
	}
	if !idle[0].closedWithin(time.Second) {
		t.Error("the oldest idle connection was not closed")
	}
}

// TestBodyBudget: bodies in flight beyond the budget get 503 with
// Retry-After; once the stalled body is gone the budget is free again.
func TestBodyBudget(t *testing.T) {
	s := startServer(t, loadModel(t, ""), Options{BodyBudget: 150, MaxBodyBytes: 150, StallTimeout: 30 * time.Second})
	hog := dialRaw(t, s)
	hog.stallBody(t, "/v1/completions") // holds 100 bytes
	waitFor(t, func() bool { return s.budget.inUse() == 100 })
	body := `{"prompt":"Once upon a time there was","max_tokens":2}` // 54 bytes
	c := dialRaw(t, s)
	c.send(t, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	resp, got := c.response(t, time.Second)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || !strings.Contains(got, "server_busy") {
		t.Fatalf("over the body budget: %d %v %s", resp.StatusCode, resp.Header, got)
	}
	hog.Close()
	waitFor(t, func() bool { return s.budget.inUse() == 0 })
	if code, b := s.post(t, "/v1/completions", body); code != 200 {
		t.Fatalf("after the budget freed: %d %v", code, b)
	}
}

// TestDrain: while draining, new requests get 503 with Connection: close
// and /health says draining; a running stream still completes.
func TestDrain(t *testing.T) {
	s := startServer(t, loadModel(t, ""), Options{})
	st := openStream(t, s, `{"prompt":"Once","max_tokens":300,"ignore_eos":true,"stream":true}`)
	defer st.Close()
	s.Drain()
	c := dialRaw(t, s)
	c.send(t, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
	resp, body := c.response(t, time.Second)
	if resp.StatusCode != 503 || !resp.Close || !strings.Contains(body, "shutting_down") {
		t.Fatalf("while draining: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	code, h := s.get(t, "/health")
	if code != 503 || h["status"] != "draining" {
		t.Fatalf("/health while draining: %d %v", code, h)
	}
	for {
		data, err := st.next()
		if err != nil {
			t.Fatalf("the running stream broke: %v", err)
		}
		if data == "[DONE]" {
			break
		}
		if strings.Contains(data, `"error"`) {
			t.Fatalf("the running stream failed: %s", data)
		}
	}
}

// TestMaxTokensOverflow: a max_tokens so large that prompt + max_tokens
// overflows is a 400, not accepted.
func TestMaxTokensOverflow(t *testing.T) {
	s := startServer(t, loadModel(t, ""), Options{})
	code, body := s.post(t, "/v1/completions", `{"prompt":"Once","max_tokens":9223372036854775807}`)
	if code != 400 || errorOf(t, body)["param"] != "max_tokens" {
		t.Fatalf("max_tokens 2^63-1: %d %v", code, body)
	}
}

func newPost(ctx context.Context, url, body string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err == nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, err
}

// TestOrigins: a browser request from a foreign origin gets 403; the
// server's own origin, listed origins and requests without Origin (curl,
// SDKs) are served; --allowed-hosts checks the Host header.
func TestOrigins(t *testing.T) {
	l := loadModel(t, "")
	s := startServer(t, l, Options{AllowedOrigins: []string{"http://app.example:3000"}})
	own := s.url // http://127.0.0.1:port
	for _, tc := range []struct {
		origin string
		want   int
	}{{"", 200}, {own, 200}, {"http://app.example:3000", 200}, {"http://evil.example", 403}, {"null", 403},
		{"http://127.0.0.1:1", 403}} {
		var h []string
		if tc.origin != "" {
			h = []string{"Origin", tc.origin}
		}
		code, body := s.post(t, "/v1/completions", `{"prompt":"Once","max_tokens":1}`, h...)
		if code != tc.want {
			t.Errorf("Origin %q: %d %v, want %d", tc.origin, code, body, tc.want)
		}
		if code == 403 && errorOf(t, body)["code"] != "origin_not_allowed" {
			t.Errorf("Origin %q: %v", tc.origin, body)
		}
	}
	anyOrigin := startServer(t, l, Options{AllowedOrigins: []string{"*"}})
	if code, _ := anyOrigin.post(t, "/v1/completions", `{"prompt":"Once","max_tokens":1}`, "Origin", "http://evil.example"); code != 200 {
		t.Errorf("--allowed-origins '*': %d", code)
	}
	hosts := startServer(t, l, Options{AllowedHosts: []string{"localhost"}})
	if code, body := hosts.get(t, "/v1/models"); code != 403 || errorOf(t, body)["code"] != "host_not_allowed" {
		t.Errorf("Host 127.0.0.1 with --allowed-hosts localhost: %d %v", code, body)
	}
	c := dialRaw(t, hosts)
	c.send(t, "GET /v1/models HTTP/1.1\r\nHost: localhost:8080\r\n\r\n")
	if resp, body := c.response(t, time.Second); resp.StatusCode != 200 {
		t.Errorf("Host localhost: %d %s", resp.StatusCode, body)
	}
}

// TestMaxQueueZero: --max-queue 0 means no waiting room: with the one slot
// busy, a second request gets 429 at once.
func TestMaxQueueZero(t *testing.T) {
	f, err := parseFlags(t, "--max-queue", "0", "--parallel", "1")
	if err != nil {
		t.Fatal(err)
	}
	f.resolve()
	s := startServer(t, loadModel(t, ""), f.Options)
	st := openStream(t, s, `{"prompt":"Once","max_tokens":400,"ignore_eos":true,"stream":true}`)
	defer st.Close()
	code, body := s.post(t, "/v1/completions", `{"prompt":"Once","max_tokens":1}`)
	if code != 429 || errorOf(t, body)["code"] != "queue_full" {
		t.Fatalf("second request with --max-queue 0: %d %v", code, body)
	}
}

// TestWatchSignals: the first signal starts the graceful shutdown, the
// second exits at once.
func TestWatchSignals(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	cancelled, exited := make(chan bool, 1), make(chan bool, 1)
	go watchSignals(sigs, func() { cancelled <- true }, func() { exited <- true }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	sigs <- os.Interrupt
	select {
	case <-cancelled:
	case <-time.After(time.Second):
		t.Fatal("the first signal did not cancel")
	}
	select {
	case <-exited:
		t.Fatal("exited on the first signal")
	case <-time.After(50 * time.Millisecond):
	}
	sigs <- os.Interrupt
	select {
	case <-exited:
	case <-time.After(time.Second):
		t.Fatal("the second signal did not exit")
	}
}

// TestServeDrains: after the shutdown signal the listener stays up for
// the grace period: new requests get 503 (not connection refused) while a
// running stream completes; then serve returns.
func TestServeDrains(t *testing.T) {
	base, logs, cancel, done := serveReady(t, "--shutdown-timeout", "20s")
	resp, err := http.Post(base+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"Once","max_tokens":480,"ignore_eos":true,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	st := &sseStream{resp: resp, rd: bufio.NewReader(resp.Body)}
	if _, err := st.next(); err != nil {
		t.Fatal(err)
	}
	cancel()
	waitFor(t, func() bool { return strings.Contains(logs.String(), "shutting down") })
	r2, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"Once"}`))
	if err != nil {
		t.Fatalf("a request while draining: %v (want a 503)", err)
	}
	r2.Body.Close()
	if r2.StatusCode != 503 || !r2.Close {
		t.Errorf("while draining: %d close=%v, want 503 with Connection: close", r2.StatusCode, r2.Close)
	}
	for {
		data, err := st.next()
		if err != nil {
			t.Fatalf("the running stream broke: %v", err)
		}
		if data == "[DONE]" {
			break
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after the drain")
	}
}

// postRaw posts body and returns the status and the raw answer.
func (s *testServer) postRaw(t testing.TB, path, body string) (int, string) {
	t.Helper()
	resp, err := s.ts.Client().Post(s.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestPromptTooLongEarly: a text that cannot fit the context is refused
// before it is tokenized or rendered, naming the field.
func TestPromptTooLongEarly(t *testing.T) {
	s := startServer(t, loadModel(t, ""), Options{})
	text := strings.Repeat("Once upon a time. ", 1<<16)
	m := s.model()
	if int64(len(text)) <= m.promptBytes {
		t.Fatalf("test text %d bytes is within the early bound %d", len(text), m.promptBytes)
	}
	for path, body := range map[string]string{
		"/v1/completions":      `{"prompt":"` + text + `"}`,
		"/v1/chat/completions": `{"messages":[{"role":"user","content":"` + text + `"}]}`,
	} {
		code, got := s.post(t, path, body)
		e := errorOf(t, got)
		if msg, _ := e["message"].(string); code != 400 || !strings.Contains(msg, "bytes of text") {
			t.Errorf("%s: %d %v", path, code, e)
		}
	}
	// A prompt near the bound but short in tokens is still served.
	if code, got := s.post(t, "/v1/completions", `{"prompt":"Once upon a time","max_tokens":2}`); code != 200 {
		t.Errorf("a short prompt: %d %v", code, got)
	}
}

// TestChunkedBodyBudget: a body of unknown length reserves the budget as
// it arrives: small chunked requests are served side by side, and one
// that outgrows what is left gets 503 server_busy.
func TestChunkedBodyBudget(t *testing.T) {
	s := startServer(t, loadModel(t, ""), Options{BodyBudget: 600 << 10, MaxBodyBytes: 2 << 20, StallTimeout: 30 * time.Second})
	hog := dialRaw(t, s)
	hog.send(t, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"pro\r\n")
	waitFor(t, func() bool { return s.budget.inUse() == chunkReservation })
	small := `{"prompt":"Once","max_tokens":2}`
	c := dialRaw(t, s)
	c.send(t, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(small), small)
	if resp, body := c.response(t, 2*time.Second); resp.StatusCode != 200 {
		t.Fatalf("a small chunked body beside another: %d %s", resp.StatusCode, body)
	}
	big := `{"prompt":"` + strings.Repeat("a", 1<<20) + `"}`
	c = dialRaw(t, s)
	c.send(t, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(big), big)
	resp, body := c.response(t, 5*time.Second)
	if resp.StatusCode != 503 || !strings.Contains(body, "server_busy") {
		t.Fatalf("a chunked body past the budget: %d %.200s", resp.StatusCode, body)
	}
	hog.Close()
	waitFor(t, func() bool { return s.budget.inUse() == 0 })
}

func idleConns(l *connLimiter) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, info := range l.conns {
		if info.state == http.StateIdle {
			n++
		}
	}
	return n
}
