package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"

	"golang.org/x/term"

	"github.com/mlxcel/mlxcel/internal/hub"
)

func init() {
	register("pull", "download a model from the Hugging Face Hub into the hub cache: ORG/NAME[@REVISION]", runPull)
	register("list", "models in the hub cache (--json)", runList)
	register("rm", "remove a model from the hub cache: ORG/NAME (--yes: do not ask)", runRm)
}

func hubClient() *hub.Client {
	c := hub.FromEnv()
	c.Log, c.TTY = os.Stderr, term.IsTerminal(int(os.Stderr.Fd()))
	return c
}

func runPull(args []string) error {
	fs := flag.NewFlagSet("pull", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("usage: mlxcel pull ORG/NAME[@REVISION]   (a bare NAME is mlx-community/NAME)")
	}
	ref, err := hub.ParseRef(fs.Arg(0))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	dir, err := hubClient().Pull(ctx, ref)
	if err != nil {
		return err
	}
	fmt.Println(dir)
	return nil
}

func runList(args []string) error {
	fs := flag.NewFlagSet("list", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c := hubClient()
	list, err := c.List()
	if err != nil {
		return err
	}
	if *asJSON {
		if list == nil {
			list = []hub.Entry{}
		}
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	if len(list) == 0 {
		fmt.Fprintf(os.Stderr, "no models in %s\n", c.Cache)
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "REPO\tREVISION\tSIZE\tPATH")
	for _, e := range list {
		rev := e.Revision
		if !e.Complete {
			rev += " (incomplete)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Repo, rev, hub.Human(e.Size), e.Path)
	}
	return tw.Flush()
}

func runRm(args []string) error {
	fs := flag.NewFlagSet("rm", flag.ContinueOnError)
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	fs.BoolVar(yes, "y", false, "shorthand for --yes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("usage: mlxcel rm [--yes] ORG/NAME")
	}
	ref, err := hub.ParseRef(fs.Arg(0))
	if err != nil {
		return err
	}
	if !*yes {
		fmt.Fprintf(os.Stderr, "remove %s and all its cached revisions? [y/N] ", ref.Repo)
		line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			return fmt.Errorf("not removed")
		}
	}
	n, err := hubClient().Remove(ref.Repo)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "removed %s (%s)\n", ref.Repo, hub.Human(n))
	return nil
}

// looksLikeModel says whether run's first argument names a model rather
// than starting the prompt: a Hub name with its ORG/ or an existing folder
// with a config.json.
func looksLikeModel(s string) bool {
	if st, err := os.Stat(s + "/config.json"); err == nil && !st.IsDir() {
		return true
	}
	return strings.Count(s, "/") == 1 && !strings.ContainsAny(s, " \t\n") && hub.LooksLikeRef(s)
}
