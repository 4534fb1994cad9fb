package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mlxcel/mlxcel/internal/tokenizer"
)

func init() {
	register("tokenize", "encode text with a model's tokenizer; prints ids and tokens as JSON", runTokenize)
	register("detokenize", "decode token ids with a model's tokenizer; prints the text as JSON", runDetokenize)
}

func runTokenize(args []string) error {
	fs := flag.NewFlagSet("tokenize", flag.ContinueOnError)
	dir := fs.String("tokenizer", "", "model or tokenizer directory (holds tokenizer.json), or a tokenizer.json file")
	special := fs.Bool("special", false, "add the special tokens of the post-processor (BOS etc.)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: mlxcel tokenize --tokenizer DIR [--special] TEXT   (TEXT - reads standard input)")
		fs.PrintDefaults()
	}
	pos, err := tokParseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		fs.Usage()
		return errors.New("missing TEXT")
	}
	text, err := tokArgOrStdin(strings.Join(pos, " "))
	if err != nil {
		return err
	}
	tk, err := tokLoad(*dir)
	if err != nil {
		return err
	}
	ids, err := tk.Encode(text, *special)
	if err != nil {
		return err
	}
	toks := make([]string, len(ids))
	for i, id := range ids {
		toks[i] = tk.TokenString(id)
	}
	if ids == nil {
		ids = []int32{}
	}
	return tokPrintJSON(struct {
		IDs    []int32  `json:"ids"`
		Tokens []string `json:"tokens"`
	}{ids, toks})
}

func runDetokenize(args []string) error {
	fs := flag.NewFlagSet("detokenize", flag.ContinueOnError)
	dir := fs.String("tokenizer", "", "model or tokenizer directory (holds tokenizer.json), or a tokenizer.json file")
	skip := fs.Bool("skip-special", false, "leave special tokens out of the text")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: mlxcel detokenize --tokenizer DIR [--skip-special] IDS   (JSON array or comma/space separated; - reads standard input)")
		fs.PrintDefaults()
	}
	pos, err := tokParseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		fs.Usage()
		return errors.New("missing IDS")
	}
	in, err := tokArgOrStdin(strings.Join(pos, " "))
	if err != nil {
		return err
	}
	ids, err := tokenizer.ParseIDs(in)
	if err != nil {
		return err
	}
	tk, err := tokLoad(*dir)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if id < 0 || int(id) >= tk.VocabSize() {
			return fmt.Errorf("id %d is outside the vocabulary (size %d)", id, tk.VocabSize())
		}
	}
	return tokPrintJSON(struct {
		Text string `json:"text"`
	}{tk.Decode(ids, *skip)})
}

// tokParseArgs parses flags that may come before or after the positional
// arguments (the flag package stops at the first positional one); "--"
// ends flag parsing.
func tokParseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		// fs.Parse consumed a "--" if it stopped on one.
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func tokArgOrStdin(arg string) (string, error) {
	if arg != "-" {
		return arg, nil
	}
	b, err := io.ReadAll(os.Stdin)
	return string(b), err
}

func tokLoad(path string) (*tokenizer.Tokenizer, error) {
	if path == "" {
		return nil, errors.New("--tokenizer is required")
	}
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		return tokenizer.LoadFile(path)
	}
	return tokenizer.Load(path)
}

func tokPrintJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
