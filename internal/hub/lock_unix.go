//go:build unix

package hub

import (
	"os"
	"path/filepath"
	"syscall"
)

// lockFile takes an exclusive flock on p (created if needed), as
// huggingface_hub's FileLock does on the same path, and returns the
// release. flock locks belong to the open file, so two goroutines of one
// process exclude each other too.
func lockFile(p string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
