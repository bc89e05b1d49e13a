package bench

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"lore/engine/synth"
	"lore/index/sample"
	"lore/weights"
)

// Demo writes what `lore demo` needs into dir, keeping files already there:
// a synthetic chat model of the given shape and an embedding model (random
// weights: their words are noise, their timings real), and the sample
// library. It reports each model it synthesises to log.
func Demo(dir, shape string, log io.Writer) (chat, embed, library string, err error) {
	models := filepath.Join(dir, "models")
	if err := os.MkdirAll(models, 0o755); err != nil {
		return "", "", "", err
	}
	chat = filepath.Join(models, "synth-"+shape+".gguf")
	embed = filepath.Join(models, "synth-embed.gguf")
	for _, m := range []struct {
		path string
		opt  synth.Options
	}{{chat, synth.Options{Shape: shape, Seed: 1}}, {embed, synth.Options{Shape: "tiny", Embedding: true, Seed: 2}}} {
		if _, err := os.Stat(m.path); err == nil {
			continue
		}
		fmt.Fprintf(log, "synthesising %s (random weights: the words will be noise, the timings are real)…\n", filepath.Base(m.path))
		if err := synth.Write(m.path, m.opt); err != nil {
			return "", "", "", err
		}
	}
	library = filepath.Join(dir, "library")
	if err := sample.WriteCorpus(library); err != nil {
		return "", "", "", err
	}
	return chat, embed, library, nil
}

// SampleQueries are the sample library's labelled questions (JSON lines of
// {"query", "relevant"}), as `lore eval retrieval` reads them.
func SampleQueries() []byte { return sample.Queries() }

// Real returns the real chat and embedding models (weights.Default) when
// they have been fetched (`lore models fetch`), else ok is false and why
// says so in one line.
func Real() (chat, embed string, ok bool, why string) {
	dir, err := weights.Dir()
	if err != nil {
		return "", "", false, err.Error()
	}
	for _, m := range []weights.Model{weights.SmolLM2F16, weights.MiniLM} {
		if !m.Fetched(dir) {
			return "", "", false, fmt.Sprintf("%s is not in %s (run `make models` or `lore models fetch`)", m.File, dir)
		}
	}
	return weights.SmolLM2F16.Path(dir), weights.MiniLM.Path(dir), true, ""
}
