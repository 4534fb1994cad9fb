package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// chaosBadBodies are malformed or hostile requests; each must get a 4xx
// in the OpenAI error shape (or a 429/503 when the server is full).
var chaosBadBodies = []string{
	``, `{`, `[]`, `null`, `"x"`, `{"prompt":`, `{"prompt":1}`, `{"prompt":"a","max_tokens":-1}`,
	`{"prompt":"a","max_tokens":9223372036854775807}`, `{"prompt":[1,2,99999999]}`, `{"prompt":[[1],[2]]}`,
	`{"prompt":"a","temperature":"hot"}`, `{"prompt":"a","temperature":1e309}`, `{"prompt":"a","top_p":0}`,
	`{"prompt":"a","n":3}`, `{"prompt":"a","stop":{"x":1}}`, `{"prompt":"a","logprobs":99}`,
	"{\"prompt\":\"\xff\xfe\"}", `{"prompt":"` + strings.Repeat("[", 5000) + `"}`, strings.Repeat("[", 100000),
	`{"messages":[]}`, `{"messages":[{"role":"robot","content":"x"}]}`, `{"messages":[{"role":"user"}]}`,
	`{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, `{"messages":"hi"}`,
	`{"model":"nope","prompt":"a"}`, `{"prompt":"a","stream_options":{"include_usage":true}}`,
}

type chaosRun struct {
	t      *testing.T
	s      *testServer
	addr   string
	client *http.Client
	mu     sync.Mutex
	status map[string]map[int]int // action -> status -> count
	bad    []string
}

func (c *chaosRun) record(action string, code int, ok bool, detail string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status[action] == nil {
		c.status[action] = map[int]int{}
	}
	c.status[action][code]++
	if !ok && len(c.bad) < 20 {
		c.bad = append(c.bad, fmt.Sprintf("%s: %d %.200s", action, code, detail))
	}
}

func (c *chaosRun) post(ctx context.Context, path, body string, stream bool) (int, string) {
	req, _ := newPost(ctx, "http://"+c.addr+path, body)
	resp, err := c.client.Do(req)
	if err != nil {
		return -1, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil && !stream {
		return -2, err.Error()
	}
	return resp.StatusCode, string(b)
}

// okBusy: full is no failure under a flood.
func okBusy(code int) bool { return code == 200 || code == 429 || code == 503 }

// reclaimed: the connection cap closed an idle keep-alive connection as
// the client reused it, the race every keep-alive close has (clients do
// not retry a POST on it). The client sees EOF, or a reset when its
// request had already reached the closed socket.
func reclaimed(code int, detail string) bool {
	return code == -1 && (strings.HasSuffix(detail, ": EOF") || strings.HasSuffix(detail, "server closed idle connection") ||
		strings.HasSuffix(detail, "connection reset by peer"))
}

func (c *chaosRun) badInput(rng *rand.Rand) {
	body := chaosBadBodies[rng.IntN(len(chaosBadBodies))]
	path := []string{"/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"}[rng.IntN(4)]
	code, got := c.post(context.Background(), path, body, false)
	ok := code >= 400 && code < 500 && strings.Contains(got, `"error"`) || code == 503 || code == 429 || reclaimed(code, got)
	if code == 200 && (path == "/tokenize" || path == "/detokenize") {
		ok = true // some bodies are fine for these
	}
	c.record("bad", code, ok, path+" "+got)
}

func (c *chaosRun) cancelled(rng *rand.Rand) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(80))*time.Millisecond)
	defer cancel()
	stream := rng.IntN(2) == 0
	body := fmt.Sprintf(`{"prompt":"Once upon a time","max_tokens":300,"ignore_eos":true,"stream":%v}`, stream)
	code, got := c.post(ctx, "/v1/completions", body, stream)
	c.record("cancel", code, code < 0 || okBusy(code), got)
}

func (c *chaosRun) normal(rng *rand.Rand) {
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":%d,"stream":%v}`, 1+rng.IntN(20), rng.IntN(2) == 0)
	code, got := c.post(context.Background(), "/v1/chat/completions", body, false)
	c.record("normal", code, okBusy(code) || reclaimed(code, got), got)
}

// slowBody sends its body a few bytes at a time, within the stall timeout.
func (c *chaosRun) slowBody(rng *rand.Rand) {
	conn, err := net.Dial("tcp", c.addr)
	if err != nil {
		c.record("slow", -1, false, err.Error())
		return
	}
	defer conn.Close()
	body := `{"prompt":"Once upon a time","max_tokens":3}`
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", len(body))
	for i := 0; i < len(body); i += 8 {
		conn.Write([]byte(body[i:min(i+8, len(body))]))
		time.Sleep(time.Duration(20+rng.IntN(60)) * time.Millisecond)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		c.record("slow", -1, false, err.Error())
		return
	}
	resp.Body.Close()
	c.record("slow", resp.StatusCode, okBusy(resp.StatusCode), "")
}

// stalled sends headers and part of a body, then nothing: the server
// must answer 408 (or refuse earlier) and close.
func (c *chaosRun) stalled(rng *rand.Rand) {
	conn, err := net.Dial("tcp", c.addr)
	if err != nil {
		c.record("stalled", -1, false, err.Error())
		return
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"pr")
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		c.record("stalled", -1, false, "no answer: "+err.Error())
		return
	}
	resp.Body.Close()
	c.record("stalled", resp.StatusCode, resp.StatusCode == 408 || resp.StatusCode == 503, "")
}

// nonReader opens a long stream and never reads it.
func (c *chaosRun) nonReader(rng *rand.Rand) {
	conn, err := net.Dial("tcp", c.addr)
	if err != nil {
		return
	}
	conn.(*net.TCPConn).SetReadBuffer(2048)
	body := `{"prompt":"Once","max_tokens":400,"ignore_eos":true,"stream":true,"logprobs":5}`
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
	conn.Close()
	c.record("nonreader", 0, true, "")
}

// garbage writes random bytes as a request.
func (c *chaosRun) garbage(rng *rand.Rand) {
	conn, err := net.Dial("tcp", c.addr)
	if err != nil {
		return
	}
	defer conn.Close()
	b := make([]byte, 1+rng.IntN(2000))
	for i := range b {
		b[i] = byte(rng.UintN(256))
	}
	conn.Write(b)
	conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	io.Copy(io.Discard, conn)
	c.record("garbage", 0, true, "")
}

// flood sends more requests at once than slots and queue hold.
func (c *chaosRun) flood(rng *rand.Rand) {
	var wg sync.WaitGroup
	for range 24 {
		wg.Go(func() {
			code, got := c.post(context.Background(), "/v1/completions", `{"prompt":"Once","max_tokens":30}`, false)
			c.record("flood", code, okBusy(code) || reclaimed(code, got), got)
		})
	}
	wg.Wait()
}

// TestChaos drives a real server on loopback with bad inputs, cancels,
// slow, stalled and non-reading clients, garbage and floods past the
// queue, for a bounded time. No request may get a 5xx other than 503, and
// afterwards the engine is idle, goroutines and RSS are back near their
// start and a normal request completes.
func TestChaos(t *testing.T) {
	s := startServer(t, loadModel(t, ""), Options{Parallel: 4, MaxQueue: 8, StallTimeout: time.Second, MaxConns: 48,
		MaxBodyBytes: 1 << 20, BodyBudget: 4 << 20})
	c := &chaosRun{t: t, s: s, addr: strings.TrimPrefix(s.url, "http://"), status: map[string]map[int]int{},
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 30 * time.Second}}
	if code, _ := c.post(context.Background(), "/v1/completions", `{"prompt":"Once","max_tokens":4}`, false); code != 200 {
		t.Fatalf("warm-up: %d", code)
	}
	debug.FreeOSMemory()
	baseG, baseRSS := runtime.NumGoroutine(), rssBytes(t)

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	actions := []func(*rand.Rand){c.badInput, c.badInput, c.badInput, c.cancelled, c.cancelled, c.normal, c.normal,
		c.slowBody, c.stalled, c.nonReader, c.garbage, c.flood}
	end := time.Now().Add(25 * time.Second)
	var wg sync.WaitGroup
	var n atomic.Int64
	for w := range 10 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for time.Now().Before(end) {
				actions[rng.IntN(len(actions))](rng)
				n.Add(1)
			}
		})
	}
	wg.Wait()
	t.Logf("%d actions: %v", n.Load(), c.status)
	for _, b := range c.bad {
		t.Error(b)
	}

	c.client.CloseIdleConnections()
	deadline := time.Now().Add(15 * time.Second)
	for {
		st := s.Engine().Stats()
		idle := st.Running == 0 && st.Waiting == 0 && s.InFlight() == 0 && st.KVUsage == 0
		debug.FreeOSMemory()
		g, rss := runtime.NumGoroutine(), rssBytes(t)
		if idle && g <= baseG+8 && rss <= baseRSS+64<<20 {
			t.Logf("after: goroutines %d (start %d), RSS %d MB (start %d MB)", g, baseG, rss>>20, baseRSS>>20)
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("not back to rest: engine %+v, in flight %d, goroutines %d (start %d), RSS %d MB (start %d MB)\n%s",
				st, s.InFlight(), g, baseG, rss>>20, baseRSS>>20, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(100 * time.Millisecond)
	}
	code, body := c.post(context.Background(), "/v1/completions", `{"prompt":"Once upon a time","max_tokens":8}`, false)
	if code != 200 || !bytes.Contains([]byte(body), []byte(`"text"`)) {
		t.Fatalf("a normal request after the chaos: %d %s", code, body)
	}
}
