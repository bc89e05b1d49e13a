package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"lore/engine"
	"lore/engine/cpu"
	"lore/engine/gguf"
	"lore/weights"
)

// ModelFile is a GGUF model found on the machine.
type ModelFile struct {
	Path          string `json:"path"`
	Name          string `json:"name"`
	Source        string `json:"source"` // lore, ollama, lmstudio, huggingface
	Architecture  string `json:"architecture"`
	Params        uint64 `json:"params"`
	Quantization  string `json:"quantization"`
	Size          int64  `json:"size"`
	ContextLength uint64 `json:"context_length"`
	RAMEstimate   uint64 `json:"ram_estimate"`
	FitsInRAM     bool   `json:"fits_in_ram"`
	Kind          string `json:"kind"` // chat, embedding, rerank
	Error         string `json:"error,omitempty"`
}

// Models lists the GGUF models in Lore's models folder, Ollama's store, and
// LM Studio's and Hugging Face's caches. Headers are validated, never loaded.
func (a *App) Models(ctx context.Context) ([]ModelFile, error) {
	home, _ := os.UserHomeDir()
	avail := availableRAM()
	var out []ModelFile
	seen := map[string]bool{}
	add := func(path, name, source string) {
		real, err := filepath.EvalSymlinks(path)
		if err != nil || seen[real] {
			return
		}
		seen[real] = true
		out = append(out, describeModel(path, name, source, avail))
	}
	scanGGUF := func(root, source string) {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || ctx.Err() != nil {
				return fs.SkipDir
			}
			if !d.IsDir() && strings.EqualFold(filepath.Ext(p), ".gguf") {
				add(p, strings.TrimSuffix(d.Name(), filepath.Ext(d.Name())), source)
			}
			return nil
		})
	}
	scanGGUF(filepath.Join(a.cfg.DataDir, "models"), "lore")
	if d, err := weights.Dir(); err == nil {
		scanGGUF(d, "lore") // `lore models fetch`
	}
	for _, m := range ollamaModels(filepath.Join(home, ".ollama", "models")) {
		add(m[0], m[1], "ollama")
	}
	scanGGUF(filepath.Join(home, ".lmstudio", "models"), "lmstudio")
	scanGGUF(filepath.Join(home, ".cache", "lm-studio", "models"), "lmstudio")
	scanGGUF(filepath.Join(home, ".cache", "huggingface", "hub"), "huggingface")
	s := a.Settings()
	for _, p := range []string{s.ChatModel, s.EmbedModel, s.RerankModel, s.FastChatModel, s.DraftModel} {
		if p != "" {
			add(p, strings.TrimSuffix(filepath.Base(p), ".gguf"), "settings")
		}
	}
	if out == nil {
		out = []ModelFile{}
	}
	return out, nil
}

func describeModel(path, name, source string, avail uint64) ModelFile {
	m := ModelFile{Path: path, Name: name, Source: source}
	f, err := gguf.Open(path)
	if err != nil {
		m.Error = err.Error()
		return m
	}
	in := f.Info()
	m.Architecture, m.Params, m.Quantization, m.Size = in.Architecture, in.ParamCount, in.Quantization, in.FileSize
	m.ContextLength = in.ContextLength
	m.RAMEstimate = in.EstimateRAM(4096)
	m.FitsInRAM = avail == 0 || m.RAMEstimate < avail
	switch {
	case in.PoolingType == gguf.PoolingRank:
		m.Kind = "rerank"
	case in.PoolingType > gguf.PoolingNone:
		m.Kind = "embedding"
	default:
		m.Kind = "chat"
	}
	return m
}

// ollamaModels maps Ollama's manifests to their model blobs: [path, name].
func ollamaModels(root string) [][2]string {
	var out [][2]string
	manifests := filepath.Join(root, "manifests")
	filepath.WalkDir(manifests, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil || len(b) > 1<<20 {
			return nil
		}
		var mf struct {
			Layers []struct {
				MediaType string `json:"mediaType"`
				Digest    string `json:"digest"`
			} `json:"layers"`
		}
		if json.Unmarshal(b, &mf) != nil {
			return nil
		}
		rel, _ := filepath.Rel(manifests, p)
		parts := strings.Split(filepath.ToSlash(rel), "/")
		name := rel
		if len(parts) >= 2 {
			name = parts[len(parts)-2] + ":" + parts[len(parts)-1]
		}
		for _, l := range mf.Layers {
			if l.MediaType == "application/vnd.ollama.image.model" && strings.HasPrefix(l.Digest, "sha256:") {
				blob := filepath.Join(root, "blobs", "sha256-"+strings.TrimPrefix(l.Digest, "sha256:"))
				out = append(out, [2]string{blob, name})
			}
		}
		return nil
	})
	return out
}

// availableRAM reads MemAvailable on Linux (0 when unknown).
func availableRAM() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kb uint64
		if n, _ := fmt.Sscanf(sc.Text(), "MemAvailable: %d kB", &kb); n == 1 {
			return kb * 1024
		}
	}
	return 0
}

// System is what the Models view shows about the machine: the CPU, the
// runner builds, and for each loaded model the build it runs on and where
// llama.cpp put its weights.
type System struct {
	CPU    CPUStatus     `json:"cpu"`
	Warm   WarmInfo      `json:"warm"` // how the chat model's system prefix got into its cache
	Loaded []LoadedModel `json:"loaded"`
	// Local is true when nothing leaves this machine; Remote lists, per
	// role, the server that receives questions or passages otherwise.
	Local  bool         `json:"local"`
	Remote []DataLeaves `json:"remote"`
	// PassageKV is the background saving of passages' KV (Settings.PassageKV).
	PassageKV PassageKVStats `json:"passage_kv"`
}

// CPUStatus is the CPU's features, the runner builds and the one models use.
type CPUStatus = cpu.Status

// DescribeCPU reports the CPU and the runner builds, without opening an App.
func DescribeCPU() CPUStatus { return cpu.Describe() }

// LoadedModel is a model whose runner is configured (it may not have started
// yet: Runner is then empty).
type LoadedModel struct {
	Role       string            `json:"role"` // chat, fast chat, chat fallback, embedding, rerank, rerank fallback
	Path       string            `json:"path"`
	CPUVariant string            `json:"cpu_variant"`
	Runner     engine.RunnerInfo `json:"runner"`
}

// System reports the CPU, the runner builds and the models in use.
func (a *App) System() System {
	s := System{CPU: cpu.Describe(), Loaded: []LoadedModel{}, Warm: a.Warmed(), PassageKV: a.PassageKV()}
	m := a.current()
	s.Remote = m.leaves()
	s.Local = len(s.Remote) == 0
	for _, r := range []struct {
		role string
		m    any
	}{{"chat", m.chat}, {"fast chat", m.fast}, {"chat fallback", m.fallback}, {"embedding", m.embed}, {"rerank", m.rerank},
		{"rerank fallback", m.rerankFallback}} {
		if m, ok := r.m.(*engine.Model); ok && m != nil {
			ri := m.Runner()
			if ri.Buffers == nil {
				ri.Buffers = []string{}
			}
			s.Loaded = append(s.Loaded, LoadedModel{Role: r.role, Path: m.Info().Path,
				CPUVariant: m.Info().CPUVariant, Runner: ri})
		}
	}
	return s
}
