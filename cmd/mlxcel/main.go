// Command mlxcel runs, serves, inspects and benchmarks LLMs.
//
// Subcommands register themselves from their own files (see register), so
// each command's flags and wiring live beside each other.
package main

import (
	"fmt"
	"os"
	"sort"
)

type command struct {
	name    string
	summary string
	run     func(args []string) error
}

var commands = map[string]command{}

func register(name, summary string, run func(args []string) error) {
	commands[name] = command{name, summary, run}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: mlxcel <command> [flags]\n\ncommands:")
	var names []string
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-12s %s\n", n, commands[n].summary)
	}
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		os.Exit(2)
	}
	c, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "mlxcel: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err := c.run(os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "mlxcel %s: %v\n", c.name, err)
		os.Exit(1)
	}
}
