package tokenizer

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// benchCorpus builds about 1 MB of mixed text: English (the Go spec and
// memory model from GOROOT, else generated words), Go source code, and
// CJK sentences assembled from common words so that most runs are unique.
func benchCorpus(tb testing.TB) string {
	tb.Helper()
	var b strings.Builder
	out, _ := exec.Command("go", "env", "GOROOT").Output() // the sources of the Go that runs the test
	root := strings.TrimSpace(string(out))
	for _, f := range []string{"doc/go_spec.html", "doc/go_mem.html"} {
		if data, err := os.ReadFile(filepath.Join(root, f)); err == nil {
			b.Write(data)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	english := strings.Fields("the of and to in is was for that with as on by at from this it be are " +
		"model token server request stream latency memory batch cache weights layer attention value " +
		"quickly carefully however because although people world system between during without")
	for b.Len() < 350_000 {
		for i := 3 + r.IntN(15); i > 0; i-- {
			b.WriteString(english[r.IntN(len(english))])
			b.WriteByte(' ')
		}
		b.WriteString(".\n")
	}
	code := 0
	for _, dir := range []string{"src/strings", "src/bytes", "src/bufio", "src/sort", "src/encoding/json"} {
		files, _ := filepath.Glob(filepath.Join(root, dir, "*.go"))
		for _, f := range files {
			if data, err := os.ReadFile(f); err == nil && code < 350_000 {
				b.Write(data)
				code += len(data)
			}
		}
	}
	if code == 0 {
		// No GOROOT sources: use this package's own code.
		files, _ := filepath.Glob("*.go")
		for _, f := range files {
			data, _ := os.ReadFile(f)
			b.Write(data)
		}
	}
	cjk := strings.Fields("我们 今天 世界 中文 测试 模型 服务器 语言 推理 速度 学习 数据 计算 问题 时间 " +
		"日本語 テキスト です ます 東京 天気 学生 先生 会社 電車 ひらがな カタカナ 漢字 " +
		"한국어 문장 입니다 서울 사람 컴퓨터 시간 오늘")
	punct := []string{"，", "。", "！", "？", "、", " ", "\n"}
	for b.Len() < 1<<20 {
		for i := 2 + r.IntN(8); i > 0; i-- {
			b.WriteString(cjk[r.IntN(len(cjk))])
		}
		b.WriteString(punct[r.IntN(len(punct))])
	}
	return b.String()
}

// BenchmarkEncodeLlama3 encodes ~1 MB of mixed text with the Llama 3
// tokenizer on one goroutine; the word cache is warm after the first run.
// Run with -cpu 1 for the single-core figure.
func BenchmarkEncodeLlama3(b *testing.B) {
	tk := loadNamed(b, "llama3_1")
	text := benchCorpus(b)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		if _, err := tk.Encode(text, true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeLlama3Cold empties the word cache before every run.
func BenchmarkEncodeLlama3Cold(b *testing.B) {
	tk := loadNamed(b, "llama3_1")
	text := benchCorpus(b)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		tk.model.cacheMu.Lock()
		clear(tk.model.cache)
		tk.model.cacheMu.Unlock()
		b.StartTimer()
		if _, err := tk.Encode(text, true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeLlama3 decodes the ids of the same corpus.
func BenchmarkDecodeLlama3(b *testing.B) {
	tk := loadNamed(b, "llama3_1")
	text := benchCorpus(b)
	ids, _ := tk.Encode(text, false)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		tk.Decode(ids, true)
	}
}

// BenchmarkLoadGemma3 loads the 33 MB Gemma 3 tokenizer.json.
func BenchmarkLoadGemma3(b *testing.B) {
	dir := filepath.Join(sharedTestdata, tokenizerDirs["gemma3"])
	if _, err := os.Stat(dir); err != nil {
		b.Skip(err)
	}
	for b.Loop() {
		if _, err := Load(dir); err != nil {
			b.Fatal(err)
		}
	}
}
