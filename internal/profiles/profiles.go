// Package profiles embeds the model profiles: config.json files of real
// checkpoints' shapes and quantization, for benchmarks and serving with
// synthetic weights (README.md here). Embedding them makes --profile NAME
// work from any directory; this folder is their only copy.
package profiles

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

//go:embed */config.json
var files embed.FS

// Names lists the embedded profiles, sorted.
func Names() []string {
	ents, _ := fs.ReadDir(files, ".")
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// Config is a profile's config.json.
func Config(name string) ([]byte, error) {
	b, err := files.ReadFile(name + "/config.json")
	if err != nil {
		return nil, fmt.Errorf("no embedded profile %q (embedded: %v)", name, Names())
	}
	return b, nil
}

// Dir writes a profile to the user's cache directory (the loaders read
// folders) and returns that folder, named as the profile, inside one
// named by a hash of the contents, so an edited profile never meets a
// stale copy.
func Dir(name string) (string, error) {
	b, err := Config(name)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(b)
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	// The folder keeps the profile's name: results are labelled with it.
	dir := filepath.Join(base, "mlxcel", "profiles", hex.EncodeToString(h[:])[:12], name)
	p := filepath.Join(dir, "config.json")
	if cur, err := os.ReadFile(p); err == nil && string(cur) == string(b) {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("profile %s: %v", name, err)
	}
	// Write then rename: a concurrent reader never sees half a file.
	tmp, err := os.CreateTemp(dir, ".config-*")
	if err != nil {
		return "", fmt.Errorf("profile %s: %v", name, err)
	}
	_, werr := tmp.Write(b)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), p)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("profile %s: %v", name, werr)
	}
	return dir, nil
}
