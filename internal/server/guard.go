package server

import (
	"context"
	"net/http"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// guard is the outermost check of every request, before authentication
// and before a byte of the body is read: connections over the cap and a
// draining server answer 503 (health checks excepted), foreign browser
// origins 403; then the body and the response get their progress
// deadlines and the body its share of the byte budget.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		probe := r.URL.Path == "/health"
		switch {
		case probe:
			s.protectProbe(r.Context())
		case overflowConn(r.Context()):
			s.refuse(w, &apiError{status: http.StatusServiceUnavailable, typ: typeUnavailable, code: "too_many_connections",
				retryAfter: 1, msg: "The server has too many open connections. Retry later."})
			return
		case s.draining.Load():
			s.refuse(w, drainingError())
			return
		}
		if e := s.checkOrigin(r); e != nil {
			s.refuse(w, e)
			return
		}
		dw := newDeadlineWriter(w, s.opts.StallTimeout, s.metrics.writeStalls.Inc)
		// A deadline left by the connection's previous request would cut
		// writes that net/http makes itself.
		dw.rc.SetWriteDeadline(time.Time{})
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			var release func()
			var e *apiError
			if r, release, e = s.budgetBody(dw, r); e != nil {
				s.refuse(w, e)
				return
			}
			defer release()
		}
		if !probe && r.URL.Path != "/metrics" {
			s.inflight.Add(1)
			defer s.inflight.Add(-1)
		}
		next.ServeHTTP(dw, r)
	})
}

// budgetBody reserves r's body in the byte budget and gives it its
// progress deadline. A declared length is reserved at once; a chunked
// body (length unknown) reserves as it arrives, so it holds no more than
// it sent. A /tokenize body weighs tokenizeWeight times its size: it
// tokenizes the whole text, at up to ~45 bytes per byte (generation
// requests are refused before tokenizing when they cannot fit).
func (s *Server) budgetBody(dw *deadlineWriter, r *http.Request) (*http.Request, func(), *apiError) {
	weight := int64(1)
	if r.URL.Path == "/tokenize" {
		weight = tokenizeWeight
	}
	pb := &progressBody{ReadCloser: r.Body, rc: dw.rc, timeout: s.opts.StallTimeout, budget: &s.budget, weight: weight,
		limit: s.opts.BodyBudget}
	n := int64(chunkReservation)
	if r.ContentLength > 0 {
		n = min(r.ContentLength, s.opts.MaxBodyBytes)
		pb.fixed = true
	}
	n = min(n*weight, s.opts.BodyBudget)
	if !s.budget.take(n) {
		return r, nil, busyError()
	}
	pb.held = n
	dw.rc.SetReadDeadline(time.Now().Add(s.opts.StallTimeout))
	r2 := r.WithContext(context.WithValue(r.Context(), decodeGateKey{}, s.decode))
	r2.Body = pb
	return r2, func() { s.releaseBody(pb.held) }, nil
}

// refuse answers a request turned away before its body was read. The
// connection is closed after the answer: net/http would otherwise read
// (up to 256 KiB of) the unread body first, which a stalled client never
// sends.
func (s *Server) refuse(w http.ResponseWriter, e *apiError) {
	closeAfterAnswer(w)
	writeError(w, e)
}

// closeAfterAnswer closes the connection once the answer is out, without
// reading the rest of the body: net/http reads it when it closes the
// body, which would wait on a client that stopped sending.
func closeAfterAnswer(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	http.NewResponseController(w).SetReadDeadline(time.Now())
}

// releaseBody returns a body's reservation. After a large body, once no
// other large one is in flight, the memory its decoding used goes back
// to the OS: the Go runtime would otherwise keep it for minutes.
func (s *Server) releaseBody(n int64) {
	left := s.budget.give(n)
	if n < freeAfterBytes || left >= freeAfterBytes {
		return
	}
	if s.freeing.CompareAndSwap(false, true) {
		go func() {
			defer s.freeing.Store(false)
			debug.FreeOSMemory()
		}()
	}
}

func drainingError() *apiError {
	return &apiError{status: http.StatusServiceUnavailable, typ: typeUnavailable, code: "shutting_down",
		msg: "The server is shutting down."}
}

// Drain starts a graceful shutdown: new requests get 503 with
// Connection: close and /health reports draining, so load balancers move
// on, while running requests finish.
func (s *Server) Drain() { s.draining.Store(true) }

// InFlight is the number of requests being handled (probes and scrapes
// excepted).
func (s *Server) InFlight() int64 { return s.inflight.Load() }

// drainState is what guard and Drain share.
type drainState struct {
	decode   decodeGate
	draining atomic.Bool
	inflight atomic.Int64
	freeing  atomic.Bool
}
