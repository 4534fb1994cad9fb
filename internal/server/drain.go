package server

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"time"
)

// Shutdown, as docs/server.md describes it: the first SIGINT or SIGTERM
// drains (new requests get 503 with Connection: close, /health says
// draining, so load balancers move on, while running requests finish for
// the grace period); the second exits at once.

// watchSignals cancels on the first signal and calls exit on the second.
func watchSignals(sigs <-chan os.Signal, cancel func(), exit func(), log *slog.Logger) {
	<-sigs
	cancel()
	<-sigs
	log.Warn("second signal: exiting now")
	exit()
}

// resolve turns flag spellings into Options: the lists, and
// --max-queue 0 meaning no waiting room (the engine's -1; its 0 would
// be the default queue).
func (f *Flags) resolve() {
	f.Options.AllowedOrigins = splitList(f.AllowedOrigins)
	f.Options.AllowedHosts = splitList(f.AllowedHosts)
	if f.Options.MaxQueue == 0 {
		f.Options.MaxQueue = -1
	}
}

// drainPoll is how often a draining server checks for running requests.
const drainPoll = 20 * time.Millisecond

// shutdown drains s for grace, then stops the engine for what still runs
// and closes hs.
func shutdown(hs *http.Server, s *Server, grace time.Duration, log *slog.Logger) error {
	log.Info("shutting down", "grace", grace)
	s.Drain()
	if !waitIdle(s, grace) {
		// Stopping the engine ends what still runs: those handlers send
		// their clients an error and return.
		log.Warn("grace period over: stopping running requests")
		s.Close()
		waitIdle(s, 5*time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if hs.Shutdown(ctx) != nil {
		hs.Close()
	}
	s.Close()
	log.Info("stopped")
	return nil
}

// waitIdle waits until no request is being handled, at most d.
func waitIdle(s *Server, d time.Duration) bool {
	end := time.Now().Add(d)
	for s.InFlight() > 0 {
		if time.Now().After(end) {
			return false
		}
		time.Sleep(min(drainPoll, time.Until(end)+time.Millisecond))
	}
	return true
}
