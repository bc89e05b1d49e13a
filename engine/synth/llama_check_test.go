//go:build llamacheck

// This check runs synthetic models through the real llama.cpp. It needs the cgo
// llama build, so it sits behind a build tag:
//
//	eval "$(make -s env)"; go test -tags "llamacheck sqlite_fts5" -run LlamaCheck -v ./engine/synth/
//
// LORE_SYNTH_SHAPES picks shapes (default "tiny 0.5b").
package synth

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"lore/engine/gguf"

	"github.com/ollama/ollama/llama"
	"github.com/ollama/ollama/ml"
)

const prose = `When you add a folder of notes, Lore reads every document, splits it into small passages and
builds an index, so that later questions can be answered from your own files. The answers cite the
passages they used. Nothing leaves your computer: the model runs locally, and you can stop it at any
time. If a file changes, only that file is read again. Large collections take longer the first time,
but searching them is fast because the index keeps the most useful information close at hand.`

func goDocs(t *testing.T) string {
	var b strings.Builder
	for _, f := range []string{"src/context/context.go", "src/net/http/doc.go", "src/sort/sort.go"} {
		data, err := os.ReadFile(filepath.Join(runtime.GOROOT(), f))
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(data)) {
			if s, ok := strings.CutPrefix(line, "// "); ok {
				b.WriteString(s)
			}
		}
	}
	return b.String()
}

func TestLlamaCheck(t *testing.T) {
	shapes := strings.Fields(os.Getenv("LORE_SYNTH_SHAPES"))
	if len(shapes) == 0 {
		shapes = []string{"tiny", "0.5b"}
	}
	llama.BackendInit()
	dir := t.TempDir()
	docs := goDocs(t)
	for _, shape := range shapes {
		for _, emb := range []bool{false, true} {
			path := filepath.Join(dir, shape+".gguf")
			start := time.Now()
			if err := Write(path, Options{Shape: shape, Embedding: emb, Seed: 1}); err != nil {
				t.Fatal(err)
			}
			st, _ := os.Stat(path)
			t.Logf("%s embedding=%v: wrote %.1f MB in %v", shape, emb, float64(st.Size())/1e6, time.Since(start).Round(time.Millisecond))
			check(t, path, shape, emb, docs)
		}
	}
}

func check(t *testing.T, path, shape string, emb bool, docs string) {
	start := time.Now()
	m, err := llama.LoadModelFromFile(path, llama.ModelParams{UseMmap: true})
	if err != nil {
		t.Fatal(err)
	}
	defer llama.FreeModel(m)
	ctx, err := llama.NewContextWithModel(m, llama.NewContextParams(2048, 512, 1, 2, ml.FlashAttentionAuto, ""))
	if err != nil {
		t.Fatal(err)
	}
	load := time.Since(start)
	if f, err := gguf.Open(path); err != nil {
		t.Error(err)
	} else {
		t.Logf("%s: EstimateRAM(2048) = %.0f MiB; process after load: %s", shape, float64(f.EstimateRAM(2048))/(1<<20), rss())
	}

	for name, text := range map[string]string{"prose": prose, "go docs": docs} {
		toks, err := m.Tokenize(text, false, false)
		if err != nil {
			t.Fatal(err)
		}
		bytes := 0
		for _, id := range toks {
			if id >= 3 && id <= 258 {
				bytes++
			}
		}
		t.Logf("%s: %s: %d words -> %d tokens = %.2f tokens/word (%d byte-fallback tokens)",
			shape, name, len(strings.Fields(text)), len(toks), float64(len(toks))/float64(len(strings.Fields(text))), bytes)
	}
	chat, _ := m.Tokenize("<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n", false, true)
	if len(chat) == 0 || chat[0] != imStartID || !containsInt(chat, imEndID) {
		t.Errorf("%s: ChatML markers not tokenised as control tokens: %v", shape, chat)
	}
	if !m.TokenIsEog(imEndID) || !m.TokenIsEog(eosID) {
		t.Errorf("%s: <|im_end|> or </s> is not end-of-generation", shape)
	}

	prompt, _ := m.Tokenize(prose, true, false)
	batch, err := llama.NewBatch(512, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer batch.Free()
	// A pooling model needs every token flagged as output: Ollama's llama.cpp
	// patch turned off the check upstream has, and ggml then aborts the process
	// on a matrix-shape assertion instead of returning an error.
	for i, id := range prompt {
		batch.Add(id, nil, i, emb || i == len(prompt)-1, 0)
	}
	start = time.Now()
	if err := ctx.Decode(batch); err != nil {
		t.Fatal(err)
	}
	prefill := time.Since(start)

	if emb {
		e := ctx.GetEmbeddingsSeq(0)
		finite(t, shape, e, m.NEmbd())
		// A different text must give a clearly different vector.
		ctx.KvCacheClear()
		batch.Clear()
		other, _ := m.Tokenize("The recipe needs two eggs, flour and a cup of warm milk.", true, false)
		for i, id := range other {
			batch.Add(id, nil, i, true, 0)
		}
		if err := ctx.Decode(batch); err != nil {
			t.Fatal(err)
		}
		e2 := ctx.GetEmbeddingsSeq(0)
		finite(t, shape, e2, m.NEmbd())
		cos := cosine(e, e2)
		if cos > 0.99 {
			t.Errorf("%s: embeddings of unrelated texts have cosine %.4f", shape, cos)
		}
		t.Logf("%s embedding: load %v, %d tokens in %v, cosine(prose, recipe)=%.3f", shape, load.Round(time.Millisecond),
			len(prompt), prefill.Round(time.Millisecond), cos)
		return
	}

	logits := ctx.GetLogitsIth(len(prompt) - 1)
	for _, x := range logits {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			t.Fatalf("%s: logits hold %v", shape, x)
		}
	}
	sampler, err := llama.NewSamplingContext(m, llama.SamplingParams{TopK: 1, Temp: 0, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	idx := batch.NumTokens() - 1
	start = time.Now()
	for pos := len(prompt); len(out) < 20; pos++ {
		id := sampler.Sample(ctx, idx)
		sampler.Accept(id, false)
		out = append(out, id)
		batch.Clear()
		batch.Add(id, nil, pos, true, 0)
		if err := ctx.Decode(batch); err != nil {
			t.Fatal(err)
		}
		idx = 0
	}
	decode := time.Since(start)
	var text bytes.Buffer
	for _, id := range out {
		text.WriteString(m.TokenToPiece(id))
	}
	t.Logf("%s generate: load %v, prefill %d tokens in %v (%.0f tok/s), 20 tokens in %v (%.1f tok/s): %q", shape,
		load.Round(time.Millisecond), len(prompt), prefill.Round(time.Millisecond), float64(len(prompt))/prefill.Seconds(),
		decode.Round(time.Millisecond), 20/decode.Seconds(), text.String())
}

// rss reports the process's resident memory from /proc (Linux only).
func rss() string {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	var out []string
	for line := range strings.Lines(string(data)) {
		for _, k := range []string{"VmRSS", "RssAnon", "RssFile"} {
			if v, ok := strings.CutPrefix(line, k+":"); ok {
				out = append(out, k+" "+strings.Join(strings.Fields(v), " "))
			}
		}
	}
	return strings.Join(out, ", ")
}

func finite(t *testing.T, shape string, e []float32, n int) {
	t.Helper()
	if len(e) != n {
		t.Fatalf("%s: embedding has %d values, want %d", shape, len(e), n)
	}
	var norm float64
	for _, x := range e {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			t.Fatalf("%s: embedding holds %v", shape, x)
		}
		norm += float64(x) * float64(x)
	}
	if norm == 0 {
		t.Fatalf("%s: embedding is all zeros", shape)
	}
}

func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
