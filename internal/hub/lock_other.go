//go:build !unix

package hub

import (
	"os"
	"path/filepath"
	"time"
)

// lockFile falls back to an exclusively created file where flock is
// missing; a stale one from a crashed run is taken over after an hour.
func lockFile(p string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	for {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			f.Close()
			return func() { os.Remove(p) }, nil
		}
		if st, serr := os.Stat(p); serr == nil && time.Since(st.ModTime()) > time.Hour {
			os.Remove(p)
			continue
		}
		time.Sleep(200 * time.Millisecond)
	}
}
