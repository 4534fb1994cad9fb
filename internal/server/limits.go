package server

import (
	"errors"
	"io"
	"net/http"
	"os"
	"runtime"
	"sync"
	"time"
)

// Limits against hostile or broken clients: progress deadlines on request
// bodies and response writes, and a byte budget for the bodies in flight.
// Whole-request timeouts do not fit a server whose streams last as long as
// their generation; a deadline that moves with each successful read or
// write cuts only the peers that stopped.
const (
	// DefaultStallTimeout is how long a body read or a response write may
	// make no progress before the connection is closed.
	DefaultStallTimeout = 60 * time.Second
	// DefaultBodyBudget bounds the bytes of request bodies being read and
	// decoded at once; beyond it requests get 503 with Retry-After.
	DefaultBodyBudget = 8 * DefaultMaxBodyBytes
	// freeAfterBytes: a request whose body was at least this large hands
	// its memory back to the OS when no other large body is in flight.
	freeAfterBytes = 1 << 20
	// chunkReservation is what a body of unknown length reserves first,
	// and then per step as it arrives.
	chunkReservation = 256 << 10
	// tokenizeWeight: a /tokenize body holds this many times its size of
	// the budget, as its tokenization takes that much more memory than
	// decoding a body does; a 15 MiB one takes the default budget alone.
	tokenizeWeight = 8
)

// deadlineWriter sets the connection's write deadline before every write
// and flush, so a client that stops reading is cut after StallTimeout
// while one that keeps reading streams for as long as it likes.
type deadlineWriter struct {
	http.ResponseWriter
	rc       *http.ResponseController
	timeout  time.Duration
	onStall  func()
	stalled  bool
	deadline time.Time
}

func newDeadlineWriter(w http.ResponseWriter, timeout time.Duration, onStall func()) *deadlineWriter {
	return &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: timeout, onStall: onStall}
}

func (w *deadlineWriter) extend() {
	// Moving the deadline costs a runtime call; skip it while the last one
	// still leaves most of the timeout (tokens are written every few ms).
	now := time.Now()
	if w.deadline.Sub(now) > w.timeout-w.timeout/8 {
		return
	}
	w.deadline = now.Add(w.timeout)
	w.rc.SetWriteDeadline(w.deadline)
}

func (w *deadlineWriter) check(err error) error {
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) && !w.stalled {
		w.stalled = true
		if w.onStall != nil {
			w.onStall()
		}
	}
	return err
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	w.extend()
	n, err := w.ResponseWriter.Write(b)
	return n, w.check(err)
}

// FlushError is what http.ResponseController.Flush calls.
func (w *deadlineWriter) FlushError() error {
	w.extend()
	return w.check(w.rc.Flush())
}

func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// progressBody moves the connection's read deadline forward on every read
// that returns data. At the end of the body (or an error) the deadline is
// cleared: net/http then reads in the background to notice a client that
// disconnects, and a deadline left behind would end that read, and with
// it the request's context, in the middle of a generation.
type progressBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	ended   bool

	// The body's share of the byte budget: held bytes reserved (weight
	// per byte read); a chunked body (not fixed) reserves more as it
	// arrives, up to limit.
	budget       *byteBudget
	held, weight int64
	limit, read  int64
	fixed        bool
}

// errBodyBudget: a chunked body outgrew what the budget had left.
var errBodyBudget = errors.New("the server's budget for request bodies is spent")

func (b *progressBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	if !b.fixed && b.read*b.weight > b.held {
		more := min(max(chunkReservation, b.read*b.weight-b.held), b.limit-b.held)
		if more <= 0 || !b.budget.take(more) {
			b.ended = true
			b.rc.SetReadDeadline(time.Now())
			return n, errBodyBudget
		}
		b.held += more
	}
	switch {
	case err == io.EOF && !b.ended:
		b.ended = true
		b.rc.SetReadDeadline(time.Time{})
	case err != nil:
		// The connection will not be reused: net/http's closing read of
		// the rest must not wait for a client that stopped.
		b.ended = true
		b.rc.SetReadDeadline(time.Now())
	case n > 0:
		b.rc.SetReadDeadline(time.Now().Add(b.timeout))
	}
	return n, err
}

// isTimeout reports a body read cut by its deadline.
func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// byteBudget is a counting semaphore of bytes.
type byteBudget struct {
	mu          sync.Mutex
	used, limit int64
}

// take reserves n bytes, or reports that they do not fit.
func (b *byteBudget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

// give returns n bytes and reports what remains in use.
func (b *byteBudget) give(n int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	return b.used
}

func (b *byteBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// decodeGate limits how many large bodies are decoded at once to half
// the CPUs: decoding 15 MiB of JSON is a second of CPU, and a few at once
// on a small machine would starve /health and running streams.
type decodeGate chan struct{}

type decodeGateKey struct{}

func newDecodeGate() decodeGate { return make(decodeGate, max(1, runtime.GOMAXPROCS(0)/2)) }

// enterDecode waits for a slot when the body is large; the returned
// function gives it back.
func enterDecode(r *http.Request, size int64) func() {
	g, _ := r.Context().Value(decodeGateKey{}).(decodeGate)
	if g == nil || size < freeAfterBytes {
		return func() {}
	}
	select {
	case g <- struct{}{}:
		return func() { <-g }
	case <-r.Context().Done():
		return func() {}
	}
}

func busyError() *apiError {
	return &apiError{status: http.StatusServiceUnavailable, typ: typeUnavailable, code: "server_busy", retryAfter: 1,
		msg: "The server is reading too many large request bodies at once. Retry later."}
}

func stalledBodyError() *apiError {
	return &apiError{status: http.StatusRequestTimeout, typ: typeInvalid, code: "request_timeout",
		msg: "The request body stopped arriving."}
}
