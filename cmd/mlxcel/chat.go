package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/mlxcel/mlxcel/internal/app"
	"github.com/mlxcel/mlxcel/internal/chat"
	"github.com/mlxcel/mlxcel/internal/chatrepl"
	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/reasoning"
	"github.com/mlxcel/mlxcel/internal/sample"
)

type chatFlags struct {
	params        sample.Params
	maxTokens     int
	engine        engine.Config // the one-sequence engine (modelFlags.engineConfig)
	system        string
	stops         []string
	showReasoning bool
}

// runChat is `mlxcel run -m MODEL` on a terminal (internal/chatrepl).
func runChat(l *app.Loaded, f chatFlags) error {
	tmpl := l.Template
	if tmpl == nil {
		var err error
		if tmpl, err = chat.Parse(chatrepl.PlainTemplate, "", ""); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "%s has no chat template: turns are written as \"User: ...\" / \"Assistant: ...\"\n", l.Name)
	}
	eng, err := engine.New(l.Model, f.engine)
	if err != nil {
		return err
	}
	eng.Start()
	defer eng.Stop()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)
	intr := make(chan struct{})
	go func() {
		for range sig {
			intr <- struct{}{}
		}
	}()
	parser := ""
	if l.Template != nil {
		parser = reasoning.Detect(l.Template.Source(), l.Model.Cfg.ModelType)
	}
	s := &chatrepl.Session{Engine: eng, MaxContext: eng.MaxContext(), Tokenizer: l.Tokenizer, Template: tmpl,
		StopIDs: l.StopIDs, Params: f.params, MaxTokens: f.maxTokens, Stop: f.stops, Reasoning: parser,
		ShowReasoning: f.showReasoning, System: f.system, In: os.Stdin, Out: os.Stdout, Info: os.Stderr,
		Interrupts: intr, Color: true, Name: l.Name + " on " + l.Model.Backend().Name()}
	return s.Run(context.Background())
}

// flagSet reports whether the command line gave the flag.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
