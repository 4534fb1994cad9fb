package bench

import "github.com/mlxcel/mlxcel/internal/tokenizer"

// LoadTokenizer opens the tokenizer.json in dir. It is a variable so the
// tokenizer is wired in one place and tests can substitute a stand-in.
var LoadTokenizer = func(dir string) (Encoder, error) {
	t, err := tokenizer.Load(dir)
	if err != nil {
		return nil, err
	}
	return t, nil
}
