package bench

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultLengths are the ladder's prompt lengths: from a chat turn to a
// long document, where attention starts to dominate prefill.
var DefaultLengths = []int{512, 2048, 8192, 32768}

// LadderOptions configure `mlxcel bench ladder`.
type LadderOptions struct {
	Profiles []string // profile names (default Representative)
	Lengths  []int    // prompt lengths (default DefaultLengths)
	Decode   DecodeOptions
	OutDir   string // where the CSV, summary and charts go
	Name     string // file name stem (default "ladder")
	Command  string // the command line, recorded in the summary

	rendered  bool   // the summary is redrawn from CSVs, not from this run
	startLoad string // load average when the run began
}

// LadderResult names what a ladder wrote.
type LadderResult struct {
	Rows                        []Row
	CSV, Summary, ChartSVG, PNG string
	Failed                      int
}

// RunLadder benchmarks every profile at every length with synthetic
// weights (each profile built once, all its lengths run on it) and writes
// <name>.csv, <name>.md and the chart as <name>.svg and <name>.png.
func RunLadder(o LadderOptions) (*LadderResult, error) {
	if len(o.Profiles) == 0 {
		o.Profiles = Representative
	}
	if len(o.Lengths) == 0 {
		o.Lengths = DefaultLengths
	}
	if o.Name == "" {
		o.Name = "ladder"
	}
	if o.OutDir == "" {
		o.OutDir = filepath.Join("docs", "benchmark_results")
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, err
	}
	o.startLoad = loadAverage()
	res := &LadderResult{
		CSV:      filepath.Join(o.OutDir, o.Name+".csv"),
		Summary:  filepath.Join(o.OutDir, o.Name+".md"),
		ChartSVG: filepath.Join(o.OutDir, o.Name+".svg"),
		PNG:      filepath.Join(o.OutDir, o.Name+".png"),
	}
	// A ladder's CSV is this run's alone: the summary and chart are made
	// from it, so appending to an older file would mix runs.
	if err := os.Remove(res.CSV); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	var csvErr error
	for _, p := range o.Profiles {
		d := o.Decode
		d.Profile, d.Model = p, ""
		d.PromptTokens = o.Lengths
		// Write each row as it is measured: a ladder over big models takes
		// long, and a crash or a kill later should not lose the rows
		// already measured (--render redraws from a partial CSV).
		d.OnRow = func(r Row) {
			if err := AppendCSV(res.CSV, []Row{r}); err != nil && csvErr == nil {
				csvErr = err
			}
		}
		rows, err := RunDecode(d)
		if err != nil && len(rows) == 0 {
			return res, err // bad options, not a failed model
		}
		if csvErr != nil {
			return res, csvErr
		}
		for _, r := range rows {
			if strings.HasPrefix(r.Status, "FAIL") {
				res.Failed++
			}
		}
		res.Rows = append(res.Rows, rows...)
	}
	if err := writeSummary(res.Summary, o, res); err != nil {
		return res, err
	}
	for _, path := range []string{res.ChartSVG, res.PNG} {
		if err := saveFigure(path, ladderPanels(res.Rows)); err != nil {
			return res, err
		}
	}
	return res, nil
}

// RenderLadder writes the summary and chart of o.Name from rows already
// measured (the CSVs of earlier ladder or decode runs, in order), and
// the rows themselves as <name>.csv unless that is one of the inputs.
func RenderLadder(o LadderOptions, csvs []string) (*LadderResult, error) {
	if o.Name == "" {
		o.Name = "ladder"
	}
	res := &LadderResult{
		CSV:      filepath.Join(o.OutDir, o.Name+".csv"),
		Summary:  filepath.Join(o.OutDir, o.Name+".md"),
		ChartSVG: filepath.Join(o.OutDir, o.Name+".svg"),
		PNG:      filepath.Join(o.OutDir, o.Name+".png"),
	}
	sameAsOut := false
	for _, c := range csvs {
		rows, err := ReadCSV(c)
		if err != nil {
			return nil, err
		}
		res.Rows = append(res.Rows, rows...)
		if filepath.Clean(c) == filepath.Clean(res.CSV) {
			sameAsOut = true
		}
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, err
	}
	if !sameAsOut {
		f, err := os.Create(res.CSV)
		if err != nil {
			return nil, err
		}
		err = WriteCSV(f, res.Rows, true)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
	}
	// The run's settings are whatever the rows say, not this command's
	// flags: take them from the first row.
	if len(res.Rows) > 0 {
		o.Decode.MaxTokens = res.Rows[0].MaxTokens
	}
	o.rendered = true
	if err := writeSummary(res.Summary, o, res); err != nil {
		return res, err
	}
	for _, path := range []string{res.ChartSVG, res.PNG} {
		if err := saveFigure(path, ladderPanels(res.Rows)); err != nil {
			return res, err
		}
	}
	return res, nil
}

// ladderPanels plots prefill and decode tok/s against prompt length, one
// line per model, from the rows that ran.
func ladderPanels(rows []Row) []panel {
	var order []string
	pre, dec := map[string][]point{}, map[string][]point{}
	for _, r := range rows {
		if r.Status != StatusOK {
			continue
		}
		if _, ok := pre[r.Model]; !ok {
			order = append(order, r.Model)
		}
		x := float64(r.PromptTokens)
		pre[r.Model] = append(pre[r.Model], point{x, r.PrefillTokS()})
		dec[r.Model] = append(dec[r.Model], point{x, r.DecodeTokS()})
	}
	mk := func(m map[string][]point) []series {
		var s []series
		for _, name := range order {
			s = append(s, series{Name: name, Points: m[name]})
		}
		return s
	}
	return []panel{
		{Title: "Prefill (synthetic weights)", XLabel: "prompt tokens", YLabel: "prefill tok/s", LogX: true, Series: mk(pre)},
		{Title: "Decode after the prompt (synthetic weights)", XLabel: "prompt tokens", YLabel: "decode tok/s", LogX: true, Series: mk(dec)},
	}
}

func writeSummary(path string, o LadderOptions, res *LadderResult) error {
	var b strings.Builder
	first := Row{Date: time.Now().UTC().Format(time.RFC3339), Version: Version(), Build: BuildType()}
	if len(res.Rows) > 0 {
		first = res.Rows[0]
	}
	fmt.Fprintf(&b, "# Prefill ladder: %s\n\n", o.Name)
	fmt.Fprintf(&b, "**Synthetic weights.** Every model here ran with deterministic random weights of the real checkpoint's\n"+
		"shapes and quantization (see [README.md](README.md)): the throughput is the real model's, the generated text is noise.\n\n")
	fmt.Fprintf(&b, "- command: `%s`\n", cmpStr(o.Command, "mlxcel bench ladder"))
	fmt.Fprintf(&b, "- date: %s\n- hardware: %s\n", first.Date, first.Hardware)
	if !o.rendered {
		fmt.Fprintf(&b, "- backend: %s\n", o.Decode.Backend)
	}
	fmt.Fprintf(&b, "- mlxcel version: %s\n- build: %s\n", first.Version, first.Build)
	if o.rendered {
		// Redrawn from earlier rows: this command's flags and this
		// machine's load say nothing about how they were measured.
		fmt.Fprintf(&b, "- decode: %d greedy tokens after the prompt (no EOS stop); rows gathered from earlier runs, "+
			"whose settings are in their own summaries\n", o.Decode.MaxTokens)
	} else {
		if la := loadAverage(); la != "" {
			// Other work on the machine slows every point; say how busy
			// it was (a quiet machine reads near 0).
			fmt.Fprintf(&b, "- load average (1, 5, 15 min): %s at the start, %s at the end\n", cmpStr(o.startLoad, "?"), la)
		}
		chunk := fmt.Sprint(o.Decode.PrefillChunk)
		if o.Decode.PrefillChunk <= 0 {
			chunk = fmt.Sprintf("%d (cuda) or %d (cpu)", DefaultPrefillChunk(true), DefaultPrefillChunk(false))
		}
		warm := fmt.Sprint(o.Decode.Warmup)
		if o.Decode.Warmup < 0 {
			warm = "1 (cuda) or 0 (cpu)"
		}
		fmt.Fprintf(&b, "- decode: %d greedy tokens after the prompt (no EOS stop); prefill in chunks of %s tokens; "+
			"%s warm-up and %d measured run(s) per point\n", o.Decode.MaxTokens, chunk, warm, o.Decode.Repeat)
	}
	fmt.Fprintf(&b, "- data: [%s](%s); chart: [%s](%s)\n\n", filepath.Base(res.CSV), filepath.Base(res.CSV),
		filepath.Base(res.ChartSVG), filepath.Base(res.ChartSVG))
	b.WriteString("| model | prompt tokens | prefill ms | prefill tok/s | decode ms | decode tok/s | status |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, r := range res.Rows {
		if r.Status != StatusOK {
			fmt.Fprintf(&b, "| %s | %s | | | | | %s |\n", r.Model, promptDesc(r), r.Status)
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %.1f | %.1f | %.1f | %.2f | %s |\n", r.Model, r.PromptTokens, r.PrefillMS,
			r.PrefillTokS(), r.DecodeMS, r.DecodeTokS(), r.Status)
	}
	fmt.Fprintf(&b, "\n![prefill and decode throughput against prompt length](%s)\n", filepath.Base(res.ChartSVG))
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func cmpStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// LadderMain is `mlxcel bench ladder`.
func LadderMain(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench ladder", stderr, "mlxcel bench ladder [--profiles a,b] [--lengths 512,2048] [flags]")
	var mf modelFlags
	mf.register(fs, 100, -1)
	profiles := stringList(Representative)
	lengths := intList(DefaultLengths)
	fs.Var(&profiles, "profiles", "comma-separated profile names")
	fs.Var(&lengths, "lengths", "comma-separated prompt lengths in tokens")
	var render stringList
	fs.Var(&render, "render", "run nothing: redraw <name>.md and the chart from these CSVs (comma-separated), e.g. to combine runs")
	out := fs.String("out", filepath.Join("docs", "benchmark_results"), "output folder")
	name := fs.String("name", "ladder", "file name stem: <out>/<name>.csv, .md, .svg, .png")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	for _, n := range lengths {
		if n <= 0 {
			return fmt.Errorf("--lengths: %d is not a positive length", n)
		}
	}
	o := LadderOptions{Profiles: profiles, Lengths: lengths, Decode: mf.options(stderr), OutDir: *out, Name: *name,
		Command: "mlxcel bench ladder " + strings.Join(args, " ")}
	var res *LadderResult
	var err error
	if len(render) > 0 {
		res, err = RenderLadder(o, render)
	} else {
		res, err = RunLadder(o)
	}
	if res != nil && len(res.Rows) > 0 {
		PrintTable(stdout, res.Rows)
		fmt.Fprintf(stdout, "\nwrote %s, %s, %s, %s\n", res.CSV, res.Summary, res.ChartSVG, res.PNG)
	}
	if err != nil {
		return err
	}
	if res.Failed > 0 {
		return fmt.Errorf("%d ladder point(s) failed (see the FAIL rows)", res.Failed)
	}
	return nil
}
