package model

import (
	"fmt"
	"strings"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// checkpointSource uploads checkpoint tensors to a backend as they are
// asked for.
type checkpointSource struct {
	ck *weights.Checkpoint
	be backend.Backend
	// OnTensor is called after each upload (progress reporting).
	onTensor func(name string, bytes int64)
}

func (c *checkpointSource) Has(name string) bool { return c.ck.Has(name) }

func (c *checkpointSource) Linear(module string, shape ...int) (backend.Weight, error) {
	h, err := c.ck.Linear(module, shape...)
	if err != nil {
		return nil, err
	}
	return c.upload(h)
}

func (c *checkpointSource) Dense(name string, shape ...int) (backend.Weight, error) {
	h, err := c.ck.Dense(name, shape...)
	if err != nil {
		return nil, err
	}
	return c.upload(h)
}

func (c *checkpointSource) upload(h *tensor.Host) (backend.Weight, error) {
	w, err := backend.Upload(c.be, h)
	if err != nil {
		return nil, err
	}
	if c.onTensor != nil {
		n := int64(len(h.Data))
		if h.Quant != nil {
			n += int64(len(h.Quant.Scales) + len(h.Quant.Biases))
		}
		c.onTensor(h.Name, n)
	}
	return w, nil
}

// LoadOptions tune Load.
type LoadOptions struct {
	// Progress, when set, is called after each tensor is uploaded.
	Progress func(name string, bytes int64)
}

// Load reads dir's config.json and safetensors and builds the model on be.
// Weights are copied to the backend, so the checkpoint is unmapped before
// returning.
func Load(dir string, be backend.Backend, opts LoadOptions) (*Model, error) {
	cfg, err := weights.LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	ck, err := weights.Open(dir, cfg.Quant)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	m, err := Build(cfg, &checkpointSource{ck: ck, be: be, onTensor: opts.Progress}, be)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", dir, err)
	}
	if unused := ck.Unused(); len(unused) > 0 {
		return nil, fmt.Errorf("%s: %d tensors of the checkpoint are not used by the %s model (a weight it would silently drop): %s",
			dir, len(unused), cfg.ModelType, listSome(unused, 8))
	}
	return m, nil
}

// Ignore declares checkpoint tensors the model knowingly leaves unused.
func (c *checkpointSource) Ignore(names ...string) { c.ck.Ignore(names...) }

// ignorer is a source that accounts for unused tensors (the checkpoint).
type ignorer interface{ Ignore(names ...string) }

// listSome joins up to n names, saying how many more there are.
func listSome(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}
