package bench

import (
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/profiles"
)

// TestListProfiles: every embedded profile is listed, and every one has
// a tensor plan (builds on synthetic weights).
func TestListProfiles(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	var b strings.Builder
	if err := ListProfiles(&b); err != nil {
		t.Fatal(err)
	}
	for _, name := range profiles.Names() {
		if !strings.Contains(b.String(), name+" ") {
			t.Errorf("%s is not listed:\n%s", name, b.String())
		}
	}
	if strings.Contains(b.String(), "not loadable") {
		t.Errorf("a profile does not load:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "gpt_oss") || !strings.Contains(b.String(), "gemma4_text") || !strings.Contains(b.String(), "qwen3_5_moe_text") {
		t.Errorf("listing:\n%s", b.String())
	}
	t.Log("\n" + b.String())
}
