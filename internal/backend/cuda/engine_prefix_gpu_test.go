//go:build linux

package cuda

import (
	"os"
	"slices"
	"testing"

	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/engine/enginetest"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/model/modeltest"
)

// TestEnginePrefixCacheWindowedGPU: the CUDA store keeps windowed layers
// paged (no backend.FeatureRings), so the engine asks it for no rings and
// Gemma 4 and gpt-oss keep prefix caching: their reference prompt run a
// second time maps its blocks up to the last boundary before its last
// token and gives the first run's tokens. Qwen3.5's recurrent layers
// cache prefixes through slot snapshots (slotstate.go): the second run
// starts from the state saved at that boundary, which it must restore to
// give the first run's tokens (the slot it lands in has absorbed the
// whole first run, or nothing).
func TestEnginePrefixCacheWindowedGPU(t *testing.T) {
	b := newOrSkip(t)
	defer b.Close()
	dir := testdataDir()
	for _, c := range []struct {
		fixture string
		caching bool
	}{{"tiny/gemma4-bf16", true}, {"tiny/gpt_oss-bf16", true}, {"tiny/qwen3_5_text-bf16", true}, {"tiny/qwen3_5_moe_text-bf16", true}} {
		t.Run(c.fixture, func(t *testing.T) {
			if _, err := os.Stat(dir + "/" + c.fixture); err != nil {
				t.Fatalf("fixture %s missing (MLXCEL_TESTDATA or ../shared/testdata): %v", c.fixture, err)
			}
			ref, err := modeltest.LoadReferenceFile(dir + "/" + c.fixture + "/reference.safetensors")
			if err != nil {
				t.Fatal(err)
			}
			m, err := model.Load(dir+"/"+c.fixture, b, model.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			e, err := engine.New(m, engine.Config{Parallel: 4, PrefillChunk: 12, BlockSize: 16, NumBlocks: 64})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Stop()
			if spec := e.KVStore().Spec(); spec.RingTokens != 0 || e.PrefixCaching() != c.caching {
				t.Fatalf("rings %d, prefix caching %v (%s): want no rings, caching %v", spec.RingTokens, e.PrefixCaching(), e.PrefixCacheOff(), c.caching)
			}
			req := engine.Request{Prompt: ref.InputIDs, MaxTokens: len(ref.GreedyIDs), IgnoreEOS: true}
			first := enginetest.Generate(t, e, []engine.Request{req})[0].Tokens
			second := enginetest.Generate(t, e, []engine.Request{req})[0].Tokens
			want := uint64(0)
			if c.caching {
				want = uint64((len(ref.InputIDs) - 1) / 16 * 16)
			}
			if st := e.Stats(); st.PrefixCacheHits != want || st.SnapshotFailures != 0 {
				t.Errorf("%d prefix-cache hit tokens, want %d; %d snapshots saved, %d refused", st.PrefixCacheHits, want, st.SnapshotsSaved, st.SnapshotFailures)
			}
			if !slices.Equal(first, second) {
				t.Errorf("second run %v\nfirst run  %v", second, first)
			}
		})
	}
}
