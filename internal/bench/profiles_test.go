package bench

import (
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/profiles"
)

// TestListProfiles: every embedded profile is listed, also one whose
// family does not load yet.
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
	if !strings.Contains(b.String(), "gpt_oss") || !strings.Contains(b.String(), "gemma4_text") {
		t.Errorf("listing:\n%s", b.String())
	}
	t.Log("\n" + b.String())
}
