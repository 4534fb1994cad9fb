// Package defaultmodel embeds the stories260k model so that `mlxcel run`
// and `mlxcel serve` work on a fresh machine with nothing downloaded.
package defaultmodel

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

//go:embed stories260k
var files embed.FS

// Name is the model's name in the API and in logs.
const Name = "stories260k"

// Dir materialises the embedded model in the user's cache directory (the
// loader memory-maps files, so it needs a real directory) and returns it.
// The folder name carries a hash of the contents: a new build never reuses
// stale files.
func Dir() (string, error) {
	h := sha256.New()
	var names []string
	fs.WalkDir(files, "stories260k", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
			b, _ := files.ReadFile(p)
			h.Write([]byte(p))
			h.Write(b)
		}
		return nil
	})
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "mlxcel", "stories260k-"+hex.EncodeToString(h.Sum(nil))[:12])
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err == nil {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".stories260k-")
	if err != nil {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return "", fmt.Errorf("default model: %v", err)
		}
		if tmp, err = os.MkdirTemp(filepath.Dir(dir), ".stories260k-"); err != nil {
			return "", fmt.Errorf("default model: %v", err)
		}
	}
	for _, p := range names {
		b, _ := files.ReadFile(p)
		if err := os.WriteFile(filepath.Join(tmp, filepath.Base(p)), b, 0o644); err != nil {
			os.RemoveAll(tmp)
			return "", fmt.Errorf("default model: %v", err)
		}
	}
	// Rename is atomic: concurrent first runs never see a half-written dir.
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		if _, serr := os.Stat(filepath.Join(dir, "model.safetensors")); serr != nil {
			return "", fmt.Errorf("default model: %v", err)
		}
	}
	return dir, nil
}
