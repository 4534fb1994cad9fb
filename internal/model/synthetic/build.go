package synthetic

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// Build makes a model of cfg's architecture with synthetic weights on be.
// The returned Source reports what was uploaded.
func Build(cfg *weights.Config, be backend.Backend, opts Options) (*model.Model, *Source, error) {
	src, err := New(cfg, be, opts)
	if err != nil {
		return nil, nil, err
	}
	m, err := model.Build(cfg, src, be)
	if err != nil {
		return nil, src, fmt.Errorf("synthetic %s: %v", ModelType(cfg), err)
	}
	return m, src, nil
}
