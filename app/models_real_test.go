package app_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lore/app"
	"lore/weights"
)

// linkOrCopy puts src at dst as a hard link (the stores hold real files,
// and the model is not copied), or a copy where the two folders are on
// different file systems.
func linkOrCopy(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Link(src, dst) == nil {
		return
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The real SmolLM2 file laid out the way each store keeps it.
func ollamaStore(t *testing.T, models, model, manifest string) string {
	sha := weights.SmolLM2.Parts[0].SHA256
	blob := filepath.Join(models, "blobs", "sha256-"+sha)
	linkOrCopy(t, model, blob)
	// What `ollama pull` writes (v0.24.0), trimmed to the layers that matter.
	writeFile(t, filepath.Join(models, "manifests", filepath.FromSlash(manifest)), fmt.Sprintf(`{"schemaVersion":2,
  "mediaType":"application/vnd.docker.distribution.manifest.v2+json",
  "config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":"sha256:%064x","size":2},
  "layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:%s","size":1},
    {"mediaType":"application/vnd.ollama.image.template","digest":"sha256:%064x","size":2}]}`, 1, sha, 2))
	return blob
}

func lmStudioStore(t *testing.T, models, model string) string {
	p := filepath.Join(models, "lmstudio-community", "SmolLM2-135M-Instruct-GGUF", "SmolLM2-135M-Instruct-Q4_1.gguf")
	linkOrCopy(t, model, p)
	return p
}

// huggingFaceStore lays the file out as huggingface_hub does: the blob
// under its hash, the snapshot a relative symlink to it, refs/main naming
// the revision.
func huggingFaceStore(t *testing.T, hub, model string) string {
	repo := filepath.Join(hub, "models--HuggingFaceTB--SmolLM2-135M-Instruct-GGUF")
	sha, rev := weights.SmolLM2.Parts[0].SHA256, "c3a1f2a4e3a6c0f0e0c6d5b4a3921807f6e5d4c3"
	linkOrCopy(t, model, filepath.Join(repo, "blobs", sha))
	writeFile(t, filepath.Join(repo, "refs", "main"), rev)
	snap := filepath.Join(repo, "snapshots", rev, "smollm2-135m-instruct-q4_1.gguf")
	if err := os.MkdirAll(filepath.Dir(snap), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..", "..", "blobs", sha), snap); err != nil {
		t.Fatal(err)
	}
	return snap
}

// TestModelStoresReal lays the real SmolLM2 GGUF out as Ollama's store, LM
// Studio's and Hugging Face's caches keep it (default folders and the ones
// their environment variables name), checks that Models finds it with what
// the file says and that Settings take it as the chat model, and for one
// layout of each store gets an answer from it through the real runner.
func TestModelStoresReal(t *testing.T) {
	model := weights.Require(t, weights.SmolLM2)
	st, err := os.Stat(model)
	if err != nil {
		t.Fatal(err)
	}
	lib := t.TempDir()
	writeFile(t, filepath.Join(lib, "river.md"), library["river.md"])

	tests := []struct {
		name   string
		env    map[string]string // relative paths are in the temporary home
		lay    func(t *testing.T, home, model string) string
		source string
		want   string // the display name
		answer bool   // choose it and ask (one of each store: the others are the same file in the same layout)
	}{
		{"ollama", nil, func(t *testing.T, home, model string) string {
			return ollamaStore(t, filepath.Join(home, ".ollama", "models"), model, "registry.ollama.ai/library/smollm2/135m")
		}, "ollama", "smollm2:135m", true},
		{"ollama, OLLAMA_MODELS, a Hugging Face model", map[string]string{"OLLAMA_MODELS": "ollama-models"},
			func(t *testing.T, home, model string) string {
				return ollamaStore(t, filepath.Join(home, "ollama-models"), model, "hf.co/HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/Q4_1")
			}, "ollama", "hf.co/HuggingFaceTB/SmolLM2-135M-Instruct-GGUF:Q4_1", false},
		{"lm studio", nil, func(t *testing.T, home, model string) string {
			return lmStudioStore(t, filepath.Join(home, ".lmstudio", "models"), model)
		}, "lmstudio", "lmstudio-community/SmolLM2-135M-Instruct-GGUF", true},
		{"lm studio, older cache", nil, func(t *testing.T, home, model string) string {
			return lmStudioStore(t, filepath.Join(home, ".cache", "lm-studio", "models"), model)
		}, "lmstudio", "lmstudio-community/SmolLM2-135M-Instruct-GGUF", false},
		{"lm studio, home pointer and downloads folder", nil, func(t *testing.T, home, model string) string {
			writeFile(t, filepath.Join(home, ".lmstudio-home-pointer"), filepath.Join(home, "lms")+"\n")
			writeFile(t, filepath.Join(home, "lms", "settings.json"), fmt.Sprintf(`{"downloadsFolder": %q}`, filepath.Join(home, "big disk", "models")))
			return lmStudioStore(t, filepath.Join(home, "big disk", "models"), model)
		}, "lmstudio", "lmstudio-community/SmolLM2-135M-Instruct-GGUF", false},
		{"hugging face", nil, func(t *testing.T, home, model string) string {
			return huggingFaceStore(t, filepath.Join(home, ".cache", "huggingface", "hub"), model)
		}, "huggingface", "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", true},
		{"hugging face, HF_HOME", map[string]string{"HF_HOME": "hf"}, func(t *testing.T, home, model string) string {
			return huggingFaceStore(t, filepath.Join(home, "hf", "hub"), model)
		}, "huggingface", "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", false},
		{"hugging face, HF_HUB_CACHE", map[string]string{"HF_HUB_CACHE": "hub-cache"}, func(t *testing.T, home, model string) string {
			return huggingFaceStore(t, filepath.Join(home, "hub-cache"), model)
		}, "huggingface", "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", false},
		{"hugging face, XDG_CACHE_HOME", map[string]string{"XDG_CACHE_HOME": "xdg"}, func(t *testing.T, home, model string) string {
			return huggingFaceStore(t, filepath.Join(home, "xdg", "huggingface", "hub"), model)
		}, "huggingface", "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A home of its own, and an empty Lore model cache: the store
			// is the only place the file can be found.
			home := t.TempDir()
			t.Setenv("HOME", home)
			t.Setenv("LORE_MODELS", t.TempDir())
			for _, k := range []string{"OLLAMA_MODELS", "HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME"} {
				t.Setenv(k, "")
			}
			for k, v := range tt.env {
				t.Setenv(k, filepath.Join(home, v))
			}
			path := tt.lay(t, home, model)

			ctx := context.Background()
			a, err := app.New(ctx, app.Config{DataDir: t.TempDir(), WorkerCmd: []string{os.Args[0], "parse-worker"}})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			found, err := a.Models(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var m *app.ModelFile
			for i := range found {
				if found[i].Path == path {
					m = &found[i]
				}
			}
			if m == nil {
				t.Fatalf("%s not found; found %+v", path, found)
			}
			if m.Error != "" || m.Source != tt.source || m.Name != tt.want || m.Kind != "chat" {
				t.Errorf("found %q from %s, kind %s (error %q); want %q from %s, chat", m.Name, m.Source, m.Kind, m.Error, tt.want, tt.source)
			}
			// What the file says: SmolLM2-135M-Instruct, llama, Q4_1, 8192
			// tokens of training context, 134.5M parameters.
			if m.Architecture != "llama" || m.Quantization != "Q4_1" || m.ContextLength != 8192 || m.Size != st.Size() ||
				m.Params < 134e6 || m.Params > 135e6 {
				t.Errorf("found %s %s, context %d, %d bytes, %d parameters; want llama Q4_1, 8192, %d bytes, 134.5M",
					m.Architecture, m.Quantization, m.ContextLength, m.Size, m.Params, st.Size())
			}
			// The weights, a 4096-token KV cache (30 layers × 3 KV heads ×
			// 64+64 dims × 2 bytes = 90 MiB) and the compute buffer.
			if kv := uint64(30 * 4096 * 3 * 128 * 2); m.RAMEstimate < uint64(m.Size)+kv || m.RAMEstimate > 512<<20 || !m.FitsInRAM {
				t.Errorf("RAM estimate %d MiB (fits %v), want the file's %d MiB + 90 MiB KV and under 512 MiB",
					m.RAMEstimate>>20, m.FitsInRAM, m.Size>>20)
			}

			// Choose it, as the Models view does (Settings take only the
			// models found), and ask.
			s := a.Settings()
			s.ChatModel, s.MaxTokens = m.Path, 8
			if err := a.SaveSettings(ctx, s); err != nil {
				t.Fatalf("choosing %s: %v", m.Path, err)
			}
			if !tt.answer {
				return
			}
			if os.Getenv("LORE_RUNNER_DIR") == "" {
				if os.Getenv("LORE_REAL_MODELS") == "1" {
					t.Fatal("LORE_RUNNER_DIR is not set although LORE_REAL_MODELS=1: the model cannot answer")
				}
				t.Skip("LORE_RUNNER_DIR is not set: `make env` sets it to the runner programs")
			}
			if _, err := a.Index(ctx, "default", []string{lib}, nil); err != nil {
				t.Fatal(err)
			}
			r := ask(t, a, "When does the river market open?", 0)
			if r.trace.FallbackLevel != app.FallbackBM25 || r.trace.DecodeTokens == 0 || strings.TrimSpace(r.answer.String()) == "" {
				t.Errorf("answer %q: level %d (%s), %d tokens decoded", r.answer.String(), r.trace.FallbackLevel,
					r.trace.FallbackReason, r.trace.DecodeTokens)
			}
			var loaded []string
			for _, l := range a.System().Loaded {
				loaded = append(loaded, l.Role+" "+l.Path)
			}
			if len(loaded) != 1 || loaded[0] != "chat "+m.Path {
				t.Errorf("loaded %q, want the chat model %s", loaded, m.Path)
			}
			t.Logf("%s: %q, %d MiB, RAM estimate %d MiB; answered %q (TTFT %d ms)", m.Name, m.Path, m.Size>>20, m.RAMEstimate>>20,
				r.answer.String(), r.trace.FirstTokenAt.Sub(r.trace.Received).Milliseconds())
		})
	}
}
