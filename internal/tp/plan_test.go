package tp

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/profiles"
	"github.com/mlxcel/mlxcel/internal/weights"
)

func profileConfig(t *testing.T, name string) *weights.Config {
	t.Helper()
	b, err := profiles.Config(name)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := weights.ParseConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestPlanProfiles plans the embedded profiles' real shapes over 2, 4 and
// 8 ranks: each rank's geometry and shard shapes, or the refusal.
func TestPlanProfiles(t *testing.T) {
	type shard struct {
		heads, kv, inter int
		q, k, o, down    []int // rank 0's shard shapes
		vocab            int   // rank 0's vocabulary rows
	}
	for _, c := range []struct {
		profile string
		n       int
		want    *shard
		err     string
	}{
		{"llama-3.1-8b-4bit", 2, &shard{16, 4, 7168, []int{2048, 4096}, []int{512, 4096}, []int{4096, 2048}, []int{4096, 7168}, 64128}, ""},
		{"llama-3.1-8b-4bit", 4, &shard{8, 2, 3584, []int{1024, 4096}, []int{256, 4096}, []int{4096, 1024}, []int{4096, 3584}, 32064}, ""},
		{"llama-3.1-8b-4bit", 8, &shard{4, 1, 1792, []int{512, 4096}, []int{128, 4096}, []int{4096, 512}, []int{4096, 1792}, 16032}, ""},
		{"qwen2.5-0.5b-4bit", 2, &shard{7, 1, 2432, []int{448, 896}, []int{64, 896}, []int{896, 448}, []int{896, 2432}, 75968}, ""},
		{"qwen2.5-0.5b-4bit", 4, nil, "14 attention heads do not split over 4 ranks"},
		{"qwen2.5-0.5b-4bit", 8, nil, "14 attention heads do not split over 8 ranks"},
		{"qwen2.5-7b-4bit", 2, &shard{14, 2, 9472, []int{1792, 3584}, []int{256, 3584}, []int{3584, 1792}, []int{3584, 9472}, 76032}, ""},
		{"qwen2.5-7b-4bit", 4, &shard{7, 1, 4736, []int{896, 3584}, []int{128, 3584}, []int{3584, 896}, []int{3584, 4736}, 38016}, ""},
		{"qwen2.5-7b-4bit", 8, nil, "28 attention heads do not split over 8 ranks"},
		{"gemma-4-31b-it-4bit", 2, nil, "per-layer geometry"},
		{"gpt-oss-20b-mxfp4-q8", 8, nil, "mxfp4-quantized weights"},
		{"qwen3.5-27b-4bit", 2, nil, "per-layer geometry"},
	} {
		t.Run(fmt.Sprintf("%s/tp%d", c.profile, c.n), func(t *testing.T) {
			cfg := profileConfig(t, c.profile)
			p, err := New(cfg, c.n)
			if c.want == nil {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r := p.Rank[0]
			if got := (shard{heads: r.Heads, kv: r.KVHeads, inter: r.Intermediate, vocab: r.VocabHi - r.VocabLo}); got.heads != c.want.heads ||
				got.kv != c.want.kv || got.inter != c.want.inter || got.vocab != c.want.vocab {
				t.Errorf("rank 0 geometry %+v, want %+v", got, *c.want)
			}
			l := "model.layers.0."
			for name, want := range map[string][]int{l + "self_attn.q_proj": c.want.q, l + "self_attn.k_proj": c.want.k,
				l + "self_attn.o_proj": c.want.o, l + "mlp.down_proj": c.want.down} {
				tt, _ := p.Lookup(name)
				if got := tt.ShardShape(0); !slices.Equal(got, want) {
					t.Errorf("%s: rank 0 holds %v, want %v", name, got, want)
				}
			}
			checkCover(t, p, cfg)
		})
	}
}

// checkCover checks that every split tensor's ranks cover it exactly
// (or, for replicated kv heads, each head on n/kv ranks) and that the
// axes are the Megatron ones.
func checkCover(t *testing.T, p *Plan, cfg *weights.Config) {
	t.Helper()
	wantAxis := map[string]Axis{"q_proj": Rows, "k_proj": Rows, "v_proj": Rows, "o_proj": Cols, "gate_proj": Rows,
		"up_proj": Rows, "down_proj": Cols, "embed_tokens": Rows, "lm_head": Rows, "weight": Replicated, "gate": Replicated}
	for _, tt := range p.Tensors {
		base := tt.Name[strings.LastIndex(tt.Name, ".")+1:]
		a, ok := wantAxis[base]
		if strings.Contains(tt.Name, ".switch_mlp.") {
			a = Rows // stacked experts, split by expert
		}
		if !ok || a != tt.Axis {
			t.Errorf("%s split along %v, want %v", tt.Name, tt.Axis, a)
		}
		if tt.Axis == Replicated {
			continue
		}
		full := tt.Shape[int(tt.Axis)-1]
		covered := make([]int, full)
		for r := range p.Ranks {
			lo, hi := tt.Range(r)
			for i := lo; i < hi; i++ {
				covered[i]++
			}
		}
		want := 1
		if strings.HasSuffix(tt.Name, "k_proj") || strings.HasSuffix(tt.Name, "v_proj") {
			want = max(p.Ranks/cfg.KVHeads, 1)
		}
		for i, k := range covered {
			if k != want {
				t.Fatalf("%s: index %d held by %d ranks, want %d", tt.Name, i, k, want)
			}
		}
	}
}

// TestPlanExperts: MoE layers are expert parallel: the router whole on
// every rank, each rank an equal run of whole experts (at their full
// width), the attention split as in dense models.
func TestPlanExperts(t *testing.T) {
	for _, c := range []struct {
		profile, block string
		n, inter       int // the experts' width
	}{
		{"mixtral-8x7b-4bit", "block_sparse_moe", 2, 14336},
		{"mixtral-8x7b-4bit", "block_sparse_moe", 8, 14336},
		{"qwen3-30b-a3b-4bit", "mlp", 4, 768},
	} {
		t.Run(fmt.Sprintf("%s/tp%d", c.profile, c.n), func(t *testing.T) {
			cfg := profileConfig(t, c.profile)
			p, err := New(cfg, c.n)
			if err != nil {
				t.Fatal(err)
			}
			per := cfg.NumExperts / c.n
			for r, rk := range p.Rank {
				if rk.ExpertLo != r*per || rk.ExpertHi != (r+1)*per {
					t.Errorf("rank %d holds experts [%d, %d), want [%d, %d)", r, rk.ExpertLo, rk.ExpertHi, r*per, (r+1)*per)
				}
			}
			blk := "model.layers.0." + c.block + "."
			router, _ := p.Lookup(blk + "gate")
			if router == nil || router.Axis != Replicated || !slices.Equal(router.Shape, []int{cfg.NumExperts, cfg.Hidden}) {
				t.Errorf("router planned %+v", router)
			}
			for name, want := range map[string][]int{"gate_proj": {per, c.inter, cfg.Hidden}, "down_proj": {per, cfg.Hidden, c.inter}} {
				tt, ok := p.Lookup(blk + "switch_mlp." + name)
				if !ok || !slices.Equal(tt.ShardShape(c.n-1), want) {
					t.Errorf("%s: last rank holds %v, want %v", name, tt.ShardShape(c.n-1), want)
				}
			}
			if _, ok := p.Lookup("model.layers.0.mlp.down_proj"); ok {
				t.Error("a MoE layer planned with a dense MLP")
			}
			checkCover(t, p, cfg)
		})
	}
	cfg := profileConfig(t, "qwen3-30b-a3b-4bit")
	cfg.NumExperts = 6
	if _, err := New(cfg, 4); err == nil || !strings.Contains(err.Error(), "6 experts do not split over 4 ranks") {
		t.Fatalf("err %v, want a refusal of 6 experts over 4 ranks", err)
	}
}

// TestPlanRefusesCutGroups: a row-parallel split that would cut a
// quantization group is refused, naming the tensor.
func TestPlanRefusesCutGroups(t *testing.T) {
	cfg := profileConfig(t, "qwen2.5-0.5b-4bit")
	cfg.Quant.Default.GroupSize = 128 // o_proj's 448 input columns per rank hold 3.5 groups
	_, err := New(cfg, 2)
	if err == nil || !strings.Contains(err.Error(), "model.layers.0.self_attn.o_proj") || !strings.Contains(err.Error(), "groups of 128") {
		t.Fatalf("err %v, want a refusal naming model.layers.0.self_attn.o_proj", err)
	}
}

func TestPlanBias(t *testing.T) {
	p, err := New(profileConfig(t, "qwen2.5-7b-4bit"), 4)
	if err != nil {
		t.Fatal(err)
	}
	q, ok := p.Bias("model.layers.3.self_attn.q_proj.bias")
	if !ok || q.Axis != Rows || !slices.Equal(q.ShardShape(1), []int{896}) || q.Rank0 {
		t.Errorf("q_proj.bias planned %+v", q)
	}
	d, ok := p.Bias("model.layers.3.mlp.down_proj.bias")
	if !ok || d.Axis != Replicated || !d.Rank0 {
		t.Errorf("down_proj.bias planned %+v", d)
	}
	if _, ok := p.Bias("model.layers.3.self_attn.q_norm.weight"); ok {
		t.Error("a norm planned as a bias")
	}
}
