package app

import (
	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/memplan"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/model/synthetic"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// Estimate is the memory estimate of the checkpoint in dir on be for the
// request's prefill chunk, and the model context it is sized against.
func Estimate(cfg *weights.Config, dir string, be backend.Backend, r memplan.Request) (memplan.Estimate, int) {
	return estimate(cfg, memplan.CheckpointBytes(dir), be, r)
}

func estimate(cfg *weights.Config, stored int64, be backend.Backend, r memplan.Request) (memplan.Estimate, int) {
	chunk := r.PrefillChunk
	if chunk <= 0 {
		chunk = 512
	}
	return memplan.New(cfg, be, stored, chunk).WithKVDtype(r.KVDtype), model.ContextOf(cfg)
}

// profilePreflight is Preflight for synthetic weights, sized by the plan.
func profilePreflight(cfg *weights.Config, be backend.Backend, r memplan.Request, name string) error {
	if err := backend.CheckKVDtype(be, r.KVDtype); err != nil {
		return err
	}
	plan, err := synthetic.Plan(cfg)
	if err != nil {
		return err
	}
	e, ctx := estimate(cfg, synthetic.TotalBytes(plan), be, r)
	return memplan.Check(e, r, ctx, name+" on "+be.Name())
}

// Preflight stops a load that the estimate says cannot fit, naming the
// numbers and what to change, or whose KV dtype the backend does not keep.
func Preflight(cfg *weights.Config, dir string, be backend.Backend, r memplan.Request, name string) error {
	if err := backend.CheckKVDtype(be, r.KVDtype); err != nil {
		return err
	}
	e, ctx := Estimate(cfg, dir, be, r)
	return memplan.Check(e, r, ctx, name+" on "+be.Name())
}
