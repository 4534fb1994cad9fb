package weights

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// WeightFiles: the index's shards when there is one, else model*.safetensors;
// other safetensors are never the checkpoint's.
func TestWeightFiles(t *testing.T) {
	dir := t.TempDir()
	touch := func(names ...string) {
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(dir, n), []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	base := func(ps []string) []string {
		for i, p := range ps {
			ps[i] = filepath.Base(p)
		}
		return ps
	}
	touch("consolidated.safetensors", "reference.safetensors")
	if _, err := WeightFiles(dir); err == nil || !strings.Contains(err.Error(), "consolidated.safetensors") {
		t.Errorf("no model files: got %v", err)
	}
	touch("model-00002-of-00002.safetensors", "model-00001-of-00002.safetensors")
	got, err := WeightFiles(dir)
	if err != nil || !slices.Equal(base(got), []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}) {
		t.Errorf("glob: %v %v", got, err)
	}
	idx := `{"weight_map":{"a":"model-00002-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}`
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(idx), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err = WeightFiles(dir); err != nil || !slices.Equal(base(got), []string{"model-00002-of-00002.safetensors"}) {
		t.Errorf("index: %v %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(`{"weight_map":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := WeightFiles(dir); err == nil || !strings.Contains(err.Error(), "weight_map") {
		t.Errorf("empty index: got %v", err)
	}
}
