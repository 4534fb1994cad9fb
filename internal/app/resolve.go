package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/term"

	"github.com/mlxcel/mlxcel/internal/defaultmodel"
	"github.com/mlxcel/mlxcel/internal/hub"
)

// ResolveModel turns what the user passed as --model into a folder and
// the model's name: "" is the embedded default, an existing path is
// itself (a local folder always wins), and ORG/NAME or a bare NAME
// (mlx-community/NAME) is a Hub repository, taken from the hub cache or
// pulled into it (docs/hub.md). Download progress goes to log.
func ResolveModel(ctx context.Context, spec string, log io.Writer) (dir, name string, err error) {
	if spec == "" {
		d, err := defaultmodel.Dir()
		return d, defaultmodel.Name, err
	}
	if _, err := os.Stat(spec); err == nil || !hub.LooksLikeRef(spec) {
		return spec, filepath.Base(filepath.Clean(spec)), nil
	}
	c := hub.FromEnv()
	c.Log = log
	if f, ok := log.(*os.File); ok {
		c.TTY = term.IsTerminal(int(f.Fd()))
	}
	dir, ref, err := c.Resolve(ctx, spec)
	if err != nil {
		if errors.Is(err, hub.ErrNotCached) && c.Offline {
			return "", "", fmt.Errorf("%v; HF_HUB_OFFLINE is set, so nothing is downloaded (no local folder %s either)", err, spec)
		}
		return "", "", err
	}
	return dir, ref.Repo, nil
}
