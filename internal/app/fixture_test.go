package app

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mlxcel/mlxcel/internal/chat"
)

// testdata is ../shared/testdata from this package.
const testdata = "../../../shared/testdata/"

// linkFixture makes a model folder of links to shared test data: each
// destination name to its path under testdata. A missing file fails.
func linkFixture(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for dst, src := range files {
		abs, err := filepath.Abs(testdata + src)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(abs); err != nil {
			t.Fatalf("fixture missing: %v", err)
		}
		if err := os.Symlink(abs, filepath.Join(dir, dst)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// goldenCase is one of transformers' template renders in
// templates/renders.golden.json.
type goldenCase struct {
	Template, Conversation string
	Messages               []chat.Message
	Rendered               string
}

// goldenRender finds transformers' render of template for conversation.
func goldenRender(t *testing.T, template, conversation string) goldenCase {
	t.Helper()
	var golden struct{ Cases []goldenCase }
	b, err := os.ReadFile(testdata + "templates/renders.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(golden.Cases, func(c goldenCase) bool {
		return c.Template == template && c.Conversation == conversation
	})
	if i < 0 {
		t.Fatalf("no %s %s case in renders.golden.json", template, conversation)
	}
	return golden.Cases[i]
}
