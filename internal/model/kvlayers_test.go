package model_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/model"
)

// KVLayersFor, read off the config alone, is the geometry the builder
// gives every fixture's layers: sliding windows (Gemma, gpt-oss), KV-shared
// layers (Gemma 4 E-series), full-layer head dims and recurrent state
// (Qwen3.5 dense and MoE).
func TestKVLayersForMatchesBuild(t *testing.T) {
	dirs, err := filepath.Glob(testdata + "tiny/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, dir := range dirs {
		if st, err := os.Stat(filepath.Join(dir, "config.json")); err != nil || st.IsDir() {
			continue
		}
		t.Run(filepath.Base(dir), func(t *testing.T) {
			m, err := model.Load(dir, cpu.New(1), model.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := model.KVLayersFor(m.Cfg)
			if err != nil {
				t.Fatal(err)
			}
			if want := m.KVLayers(); !slices.Equal(got, want) {
				t.Errorf("KVLayersFor:\n%+v\nbuilt model:\n%+v", got, want)
			}
		})
	}
}
