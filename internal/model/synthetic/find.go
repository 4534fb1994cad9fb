package synthetic

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mlxcel/mlxcel/internal/profiles"
	"github.com/mlxcel/mlxcel/internal/settings"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// tokenizerNames pairs architectures with the real tokenizer of their
// checkpoints, as internal/profiles/README.md prescribes. Gemma 4 keeps Gemma 3's
// 262144-token vocabulary.
var tokenizerNames = map[string]string{
	"llama":       "llama3_1",
	"qwen2":       "qwen3",
	"qwen3":       "qwen3",
	"qwen3_moe":   "qwen3",
	"mixtral":     "mixtral",
	"mistral":     "mixtral",
	"gemma4":      "gemma3",
	"gemma4_text": "gemma3",
	"gemma3":      "gemma3",
	"gemma3_text": "gemma3",
}

// searchRoots are the folders whose ancestors are searched for
// shared/testdata: the working directory (a checkout, or a test's
// package folder inside one) and the executable's folder.
func searchRoots() []string {
	var roots []string
	if wd, err := os.Getwd(); err == nil {
		roots = append(roots, wd)
	}
	if exe, err := os.Executable(); err == nil {
		roots = append(roots, filepath.Dir(exe))
	}
	return roots
}

func ancestors(dir string) []string {
	var out []string
	for {
		out = append(out, dir)
		parent := filepath.Dir(dir)
		if parent == dir {
			return out
		}
		dir = parent
	}
}

func isFile(p string) bool { st, err := os.Stat(p); return err == nil && !st.IsDir() }

// FindProfile resolves a profile name (or a folder holding a config.json)
// to its folder: profilesDir when given, then $MLXCEL_PROFILES, then the
// profiles embedded in the binary (internal/profiles).
func FindProfile(name, profilesDir string) (string, error) {
	if strings.ContainsRune(name, os.PathSeparator) || isFile(filepath.Join(name, "config.json")) {
		if isFile(filepath.Join(name, "config.json")) {
			return name, nil
		}
		return "", fmt.Errorf("profile %s: no config.json there", name)
	}
	var tried []string
	try := func(dir string) bool {
		p := filepath.Join(dir, name)
		tried = append(tried, p)
		return isFile(filepath.Join(p, "config.json"))
	}
	for _, d := range []string{profilesDir, settings.Get("MLXCEL_PROFILES")} {
		if d != "" && try(d) {
			return filepath.Join(d, name), nil
		}
	}
	if dir, err := profiles.Dir(name); err == nil {
		return dir, nil
	}
	where := ""
	if len(tried) > 0 {
		where = " or in " + strings.Join(dedupe(tried), ", ")
	}
	return "", fmt.Errorf("profile %q not found among the embedded ones (%s)%s; pass --profiles-dir", name,
		strings.Join(profiles.Names(), ", "), where)
}

// TokenizerName is the shared tokenizer a profile of cfg's architecture
// pairs with.
func TokenizerName(cfg *weights.Config) (string, bool) {
	n, ok := tokenizerNames[ModelType(cfg)]
	if !ok {
		n, ok = tokenizerNames[cfg.ModelType]
	}
	return n, ok
}

// FindTokenizer resolves the tokenizer for a model. spec may be a folder
// with tokenizer.json, or a name looked up like a profile's default: in
// $MLXCEL_TOKENIZERS, then shared/testdata/tokenizers/<name> beside the
// checkout (../shared from the repository root) or any folder above. The
// tokenizers are 8-33 MB, so they are found there rather than copied.
func FindTokenizer(spec string) (string, error) {
	if isFile(filepath.Join(spec, "tokenizer.json")) {
		return spec, nil
	}
	if strings.ContainsRune(spec, os.PathSeparator) {
		return "", fmt.Errorf("tokenizer %s: no tokenizer.json there", spec)
	}
	var tried []string
	try := func(dir string) bool {
		tried = append(tried, dir)
		return isFile(filepath.Join(dir, "tokenizer.json"))
	}
	if d := settings.Get("MLXCEL_TOKENIZERS"); d != "" && try(filepath.Join(d, spec)) {
		return filepath.Join(d, spec), nil
	}
	for _, r := range searchRoots() {
		for _, a := range ancestors(r) {
			// Shared tokenizers, then the shared models' own (stories260k).
			for _, kind := range []string{"tokenizers", "models"} {
				p := filepath.Join(a, "shared", "testdata", kind, spec)
				if try(p) {
					return p, nil
				}
			}
		}
	}
	return "", fmt.Errorf("tokenizer %q not found (looked in %s); pass --tokenizer DIR (a folder with tokenizer.json)",
		spec, strings.Join(dedupe(tried), ", "))
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	if len(out) > 6 {
		out = append(out[:6], fmt.Sprintf("... %d more", len(out)-6))
	}
	return out
}
