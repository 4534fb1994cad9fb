package server

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// The connection cap. Every open connection costs a goroutine and its
// buffers; 20,000 stalled ones took 350 MB and every accept slot. Up to
// MaxConns connections are served normally. Past the cap an idle
// keep-alive connection is closed to make room; when none is idle the
// new connection is an overflow one: it gets one answer and is closed,
// 503 for anything but /health, so probes still see the server while a
// flood is held off. Overflow connections have a short header deadline
// and at most overflowConns of them are open (the oldest is dropped).
const (
	DefaultMaxConns  = 1024
	overflowConns    = 256
	overflowDeadline = 5 * time.Second
)

type connInfo struct {
	state    http.ConnState
	since    time.Time
	overflow bool
	probe    bool // an overflow connection answering /health
}

type connLimiter struct {
	max      int
	mu       sync.Mutex
	conns    map[net.Conn]*connInfo
	normal   int
	overflow []net.Conn // oldest first
}

func newConnLimiter(max int) *connLimiter {
	return &connLimiter{max: max, conns: map[net.Conn]*connInfo{}}
}

// limitedListener admits each accepted connection through the limiter.
type limitedListener struct {
	net.Listener
	l *connLimiter
}

func (ln *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if c = ln.l.admit(c); c != nil {
			return c, nil
		}
	}
}

// admit registers c, making room or marking it as overflow; nil means
// c was closed.
func (l *connLimiter) admit(c net.Conn) net.Conn {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.normal >= l.max {
		if idle := l.oldestIdle(); idle != nil {
			l.forget(idle)
			idle.Close()
		}
	}
	if l.normal < l.max {
		l.normal++
		l.conns[c] = &connInfo{state: http.StateNew, since: time.Now()}
		return c
	}
	if len(l.overflow) >= overflowConns {
		old := l.overflowVictim()
		if old == nil {
			c.Close() // every overflow connection is a probe being answered
			return nil
		}
		l.forget(old)
		old.Close()
	}
	oc := &capConn{Conn: c, limit: time.Now().Add(overflowDeadline)}
	l.conns[oc] = &connInfo{state: http.StateNew, since: time.Now(), overflow: true}
	l.overflow = append(l.overflow, oc)
	return oc
}

// overflowVictim is the overflow connection to drop for a new one: the
// oldest that has sent nothing yet, else the oldest that is not a health
// probe being answered; nil when all are probes.
func (l *connLimiter) overflowVictim() net.Conn {
	var quiet, any net.Conn
	for _, c := range l.overflow { // oldest first
		info := l.conns[c]
		if info.state == http.StateNew && quiet == nil {
			quiet = c
		}
		if !info.probe && any == nil {
			any = c
		}
	}
	if quiet != nil {
		return quiet
	}
	return any
}

// protect marks c as a health probe: it is not dropped for newcomers.
func (l *connLimiter) protect(c net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if info, ok := l.conns[c]; ok {
		info.probe = true
	}
}

func (l *connLimiter) oldestIdle() net.Conn {
	var best net.Conn
	var since time.Time
	for c, info := range l.conns {
		if !info.overflow && info.state == http.StateIdle && (best == nil || info.since.Before(since)) {
			best, since = c, info.since
		}
	}
	return best
}

// forget drops c from the books (l.mu held).
func (l *connLimiter) forget(c net.Conn) {
	info, ok := l.conns[c]
	if !ok {
		return
	}
	delete(l.conns, c)
	if !info.overflow {
		l.normal--
		return
	}
	for i, o := range l.overflow {
		if o == c {
			l.overflow = append(l.overflow[:i], l.overflow[i+1:]...)
			break
		}
	}
}

// connState is http.Server.ConnState.
func (l *connLimiter) connState(c net.Conn, st http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st == http.StateClosed || st == http.StateHijacked {
		l.forget(c)
		return
	}
	if info, ok := l.conns[c]; ok {
		info.state, info.since = st, time.Now()
	}
}

// open counts the normal and overflow connections.
func (l *connLimiter) open() (normal, overflow int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.normal, len(l.overflow)
}

type overflowKey struct{}

// connContext marks the requests of overflow connections.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if oc, ok := c.(*capConn); ok {
		return context.WithValue(ctx, overflowKey{}, oc)
	}
	return ctx
}

func overflowConn(ctx context.Context) bool {
	_, ok := ctx.Value(overflowKey{}).(*capConn)
	return ok
}

// protectProbe keeps an overflow connection that asks for /health from
// being dropped for newcomers while it is answered.
func (s *Server) protectProbe(ctx context.Context) {
	if oc, ok := ctx.Value(overflowKey{}).(*capConn); ok {
		s.conns.protect(oc)
	}
}

// capConn is an overflow connection: no read deadline net/http sets
// reaches past its limit, so a slow client cannot hold it for the full
// header timeout.
type capConn struct {
	net.Conn
	limit time.Time
}

func (c *capConn) SetReadDeadline(t time.Time) error {
	if t.IsZero() || t.After(c.limit) {
		t = c.limit
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *capConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetWriteDeadline(t)
}

// HTTPServer configures hs and ln for serving s: the connection cap, the
// header and idle timeouts. Serve hs on the returned listener.
func (s *Server) HTTPServer(hs *http.Server, ln net.Listener) net.Listener {
	hs.Handler = s.Handler()
	hs.ConnState = s.conns.connState
	hs.ConnContext = connContext
	if hs.ReadHeaderTimeout == 0 {
		hs.ReadHeaderTimeout = 30 * time.Second
	}
	if hs.IdleTimeout == 0 {
		hs.IdleTimeout = 2 * time.Minute
	}
	// No WriteTimeout: a stream lasts as long as its generation; writes
	// get progress deadlines instead (limits.go).
	return &limitedListener{Listener: ln, l: s.conns}
}
