package hub

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress reports a pull: on a terminal one bar for the whole pull
// (bytes, rate, ETA) whose label names the current file and its share;
// otherwise plain lines, one as each file starts and ends and one every
// plainEvery while a big file transfers, so CI logs stay short.
type progress struct {
	mu         sync.Mutex
	w          io.Writer
	bar        *progressbar.ProgressBar
	what       string
	files, idx int
	total      int64
	before     int64 // bytes of the files already done
	name       string
	size, have int64 // the current file
	fileStart  time.Time
	start      time.Time
	lastLine   time.Time
}

const plainEvery = 10 * time.Second

func newProgress(w io.Writer, tty bool, what string, files int, total int64) *progress {
	if w == nil {
		w = io.Discard
	}
	p := &progress{w: w, what: what, files: files, total: total, start: time.Now()}
	if tty {
		p.bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(w), progressbar.OptionShowBytes(true),
			progressbar.OptionSetWidth(24), progressbar.OptionThrottle(150*time.Millisecond),
			progressbar.OptionSetPredictTime(true), progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionSetDescription("pulling "+what))
	} else {
		fmt.Fprintf(w, "pulling %s: %d files, %s\n", what, files, human(total))
	}
	return p
}

func (p *progress) startFile(name string, size int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idx++
	p.name, p.size, p.have, p.fileStart, p.lastLine = name, size, 0, time.Now(), time.Now()
	p.describe()
}

// Write counts transferred bytes (an io.Writer beside the file).
func (p *progress) Write(b []byte) (int, error) {
	p.add(int64(len(b)))
	return len(b), nil
}

func (p *progress) add(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.have += n
	p.update()
}

// resumeAt sets the current file's bytes (what a resumed transfer starts
// from, or 0 after a restart).
func (p *progress) resumeAt(have int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.have = have
	p.update()
}

func (p *progress) reset(int64) { p.resumeAt(0) }

func (p *progress) update() {
	if p.bar != nil {
		p.describe()
		p.bar.Set64(p.before + p.have)
		return
	}
	if time.Since(p.lastLine) >= plainEvery && p.size > 0 {
		p.lastLine = time.Now()
		fmt.Fprintf(p.w, "  %s: %s of %s (%.0f%%), total %s of %s\n", p.name, human(p.have), human(p.size),
			100*float64(p.have)/float64(p.size), human(p.before+p.have), human(p.total))
	}
}

func (p *progress) describe() {
	if p.bar == nil {
		return
	}
	pct := 100.0
	if p.size > 0 {
		pct = 100 * float64(p.have) / float64(p.size)
	}
	p.bar.Describe(fmt.Sprintf("[%d/%d] %s %.0f%%, total", p.idx, p.files, p.name, pct))
}

func (p *progress) endFile() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.before += p.size
	p.have = 0
	if p.bar != nil {
		p.bar.Set64(p.before)
		return
	}
	d := time.Since(p.fileStart)
	fmt.Fprintf(p.w, "  [%d/%d] %s %s in %.1fs\n", p.idx, p.files, p.name, human(p.size), d.Seconds())
}

func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := time.Since(p.start)
	if p.bar != nil {
		p.bar.Finish()
		fmt.Fprintln(p.w)
	}
	fmt.Fprintf(p.w, "pulled %s: %d files, %s in %.1fs\n", p.what, p.files, human(p.total), d.Seconds())
}

func (p *progress) abort() {
	if p.bar != nil {
		p.bar.Exit()
		fmt.Fprintln(p.w)
	}
}

// human writes a byte count in decimal units, as the Hub's pages do.
func human(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

// Human is human for the CLI's listings.
func Human(n int64) string { return human(n) }
