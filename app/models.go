package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	ollamaname "github.com/ollama/ollama/types/model"

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
	Kind          string `json:"kind"` // chat, embedding, rerank, projector (a vision model's mmproj)
	Error         string `json:"error,omitempty"`
}

// Models lists the GGUF models in Lore's models folder, Ollama's store, and
// LM Studio's and Hugging Face's caches (modelStores says where each is
// looked for). Headers are validated, never loaded. A file reached by more
// than one path (a symlink, a Hugging Face snapshot) is listed once, under
// the first.
func (a *App) Models(ctx context.Context) ([]ModelFile, error) {
	avail := availableRAM()
	var out []ModelFile
	seen := map[string]bool{}
	add := func(f foundModel) {
		real, err := filepath.EvalSymlinks(f.path)
		if err != nil || seen[real] {
			return
		}
		seen[real] = true
		out = append(out, describeModel(f.path, f.name, f.source, avail))
	}
	lore := []string{filepath.Join(a.cfg.DataDir, "models")}
	if d, err := weights.Dir(); err == nil {
		lore = append(lore, d) // `lore models fetch`
	}
	home, _ := os.UserHomeDir()
	for _, f := range findModels(ctx, lore, modelStores(home, os.Getenv)) {
		add(f)
	}
	s := a.Settings()
	for _, p := range []string{s.ChatModel, s.EmbedModel, s.RerankModel, s.FastChatModel, s.DraftModel} {
		if p != "" {
			add(foundModel{p, strings.TrimSuffix(filepath.Base(p), ".gguf"), "settings"})
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
	case in.Architecture == "clip":
		m.Kind = "projector" // a vision model's mmproj file, beside its LLM: not a chat model
	case in.PoolingType == gguf.PoolingRank:
		m.Kind = "rerank"
	case in.PoolingType > gguf.PoolingNone:
		m.Kind = "embedding"
	default:
		m.Kind = "chat"
	}
	return m
}

// stores are the folders other apps keep GGUF models in. Each list may
// name folders that do not exist.
type stores struct {
	Ollama      []string // models folders: manifests/ and blobs/
	LMStudio    []string // models folders: <publisher>/<repo>/<file>.gguf
	HuggingFace []string // hub caches: models--<org>--<repo>/snapshots/<rev>/<file>.gguf
}

// modelStores says where Ollama, LM Studio and Hugging Face keep models:
// the folders the environment (getenv) names, read the way each tool reads
// it, and the default folders under home besides, since Lore may not run
// with the environment the tool ran with:
//
//   - Ollama: $OLLAMA_MODELS, ~/.ollama/models, and the Linux service's
//     /usr/share/ollama/.ollama/models.
//   - LM Studio: the home named in ~/.lmstudio-home-pointer, ~/.lmstudio and
//     the older ~/.cache/lm-studio, each with models/ and the
//     downloadsFolder set in its settings.json.
//   - Hugging Face: $HF_HUB_CACHE, $HUGGINGFACE_HUB_CACHE (older), $HF_HOME/hub,
//     $XDG_CACHE_HOME/huggingface/hub and ~/.cache/huggingface/hub.
func modelStores(home string, getenv func(string) string) stores {
	var s stores
	under := func(base string, elem ...string) string {
		if base == "" {
			return ""
		}
		return filepath.Join(append([]string{base}, elem...)...)
	}
	s.Ollama = compact(getenv("OLLAMA_MODELS"), under(home, ".ollama", "models"))
	if runtime.GOOS == "linux" {
		s.Ollama = compact(append(s.Ollama, "/usr/share/ollama/.ollama/models")...)
	}

	var lmHomes []string
	if b, err := os.ReadFile(under(home, ".lmstudio-home-pointer")); err == nil {
		lmHomes = append(lmHomes, strings.TrimSpace(string(b)))
	}
	lmHomes = compact(append(lmHomes, under(home, ".lmstudio"), under(home, ".cache", "lm-studio"))...)
	for _, h := range lmHomes {
		s.LMStudio = append(s.LMStudio, filepath.Join(h, "models"))
		var set struct {
			DownloadsFolder string `json:"downloadsFolder"`
		}
		if b, err := os.ReadFile(filepath.Join(h, "settings.json")); err == nil && json.Unmarshal(b, &set) == nil {
			s.LMStudio = append(s.LMStudio, set.DownloadsFolder)
		}
	}
	s.LMStudio = compact(s.LMStudio...)

	s.HuggingFace = compact(getenv("HF_HUB_CACHE"), getenv("HUGGINGFACE_HUB_CACHE"), under(getenv("HF_HOME"), "hub"),
		under(getenv("XDG_CACHE_HOME"), "huggingface", "hub"), under(home, ".cache", "huggingface", "hub"))
	return s
}

// compact cleans the folders and drops empty, relative and repeated ones,
// keeping the order.
func compact(dirs ...string) []string {
	var out []string
	for _, d := range dirs {
		if d != "" && filepath.IsAbs(d) && !slices.Contains(out, filepath.Clean(d)) {
			out = append(out, filepath.Clean(d))
		}
	}
	return out
}

// foundModel is a GGUF file found in a store, with the name that store
// gives it.
type foundModel struct{ path, name, source string }

// findModels lists the GGUF files in Lore's folders (named by file) and in
// the stores (named as each tool names them: Ollama name:tag, LM Studio
// publisher/repo, Hugging Face org/repo; a folder holding several GGUF
// files adds the file's name).
func findModels(ctx context.Context, lore []string, s stores) []foundModel {
	var out []foundModel
	for _, d := range lore {
		walkGGUF(ctx, d, func(p string) {
			out = append(out, foundModel{p, strings.TrimSuffix(filepath.Base(p), filepath.Ext(p)), "lore"})
		})
	}
	for _, d := range s.Ollama {
		out = append(out, ollamaModels(ctx, d)...)
	}
	for _, d := range s.LMStudio {
		walkGGUF(ctx, d, func(p string) {
			out = append(out, foundModel{p, repoName(d, p), "lmstudio"})
		})
	}
	for _, d := range s.HuggingFace {
		out = append(out, huggingFaceModels(ctx, d)...)
	}
	return out
}

// walkGGUF calls fn for each *.gguf file under root (symlinks to files
// included; symlinked folders are not followed), leaving out the later
// parts of split models.
func walkGGUF(ctx context.Context, root string, fn func(path string)) {
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if ctx.Err() != nil {
			return fs.SkipAll
		}
		if err != nil {
			return nil // an entry that cannot be read, or a folder that cannot be listed: left out
		}
		if !d.IsDir() && strings.EqualFold(filepath.Ext(p), ".gguf") && !laterSplit(d.Name()) {
			fn(p)
		}
		return nil
	})
}

// laterSplit reports whether a file is the second or a later part of a
// model llama.cpp split into several (NAME-00002-of-00003.gguf): the first
// part is the model, llama.cpp loads the others with it.
func laterSplit(name string) bool {
	stem := strings.TrimSuffix(name, filepath.Ext(name))
	i := strings.LastIndex(stem, "-of-")
	if i < 6 || stem[i-6] != '-' {
		return false
	}
	n, err := strconv.Atoi(stem[i-5 : i])
	return err == nil && n > 1
}

// repoName names the file at path under an LM Studio models folder root:
// publisher/repo, with the file's name added where the folder holds more
// than one GGUF file (several quantisations, a vision projector).
func repoName(root, path string) string {
	stem := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	rel, err := filepath.Rel(root, filepath.Dir(path))
	if err != nil || rel == "." {
		return stem
	}
	name := filepath.ToSlash(rel)
	if ggufFiles(filepath.Dir(path)) > 1 {
		name += "/" + stem
	}
	return name
}

func ggufFiles(dir string) int {
	es, _ := os.ReadDir(dir)
	n := 0
	for _, e := range es {
		if strings.EqualFold(filepath.Ext(e.Name()), ".gguf") && !laterSplit(e.Name()) {
			n++
		}
	}
	return n
}

// huggingFaceModels lists the GGUF files in a Hugging Face hub cache:
// hub/models--<org>--<repo>/snapshots/<revision>/<path>.gguf, each usually a
// symlink to ../../blobs/<hash>. They are named org/repo (Hugging Face
// does not allow "--" in names, so the folder's name splits cleanly), with
// the file's name added where the snapshot folder holds several.
func huggingFaceModels(ctx context.Context, hub string) []foundModel {
	repos, _ := filepath.Glob(filepath.Join(hub, "models--*"))
	var out []foundModel
	for _, r := range repos {
		repo := strings.ReplaceAll(strings.TrimPrefix(filepath.Base(r), "models--"), "--", "/")
		snaps, _ := os.ReadDir(filepath.Join(r, "snapshots"))
		for _, snap := range snaps {
			dir := filepath.Join(r, "snapshots", snap.Name())
			walkGGUF(ctx, dir, func(p string) {
				name := repo
				if rel, _ := filepath.Rel(dir, p); ggufFiles(filepath.Dir(p)) > 1 || filepath.Dir(rel) != "." {
					name += "/" + strings.TrimSuffix(filepath.ToSlash(rel), filepath.Ext(rel))
				}
				out = append(out, foundModel{p, name, "huggingface"})
			})
		}
	}
	return out
}

// ollamaModels maps the manifests in an Ollama models folder to their model
// blobs, named as `ollama list` names them (smollm2:135m; user/model:tag;
// hf.co/org/repo:tag).
func ollamaModels(ctx context.Context, root string) []foundModel {
	var out []foundModel
	manifests := filepath.Join(root, "manifests")
	filepath.WalkDir(manifests, func(p string, d fs.DirEntry, err error) error {
		if ctx.Err() != nil {
			return fs.SkipAll
		}
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
		name := filepath.ToSlash(rel)
		if n := ollamaname.ParseNameFromFilepath(rel); n.IsValid() {
			name = n.DisplayShortest()
		}
		for _, l := range mf.Layers {
			hex, ok := strings.CutPrefix(l.Digest, "sha256:")
			if l.MediaType == "application/vnd.ollama.image.model" && ok && isHex64(hex) {
				out = append(out, foundModel{filepath.Join(root, "blobs", "sha256-"+hex), name, "ollama"})
			}
		}
		return nil
	})
	return out
}

// isHex64 reports whether s is a sha256 in lower-case hex, as Ollama
// writes digests (so a manifest cannot name a path outside blobs/).
func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
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
