// Package cpu picks the model runner build that suits the processor. The
// runner (llama.cpp) is compiled several times, once per instruction-set
// level (the Makefile's RUNNER_VARIANTS), and shipped as lore-runner-<variant>
// files side by side; at run time the best one this CPU can execute is
// started, as llama.cpp's GGML_CPU_ALL_VARIANTS and Ollama do.
package cpu

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
)

// Variant is one build of the runner and the CPU features it needs.
type Variant struct {
	Name  string
	Needs []string // feature names, as Detect reports them
	// OptIn variants are used only when asked for by name (LORE_CPU_VARIANT):
	// they have not been measured faster than the next one down.
	OptIn bool
	About string
}

// x86-64 levels (x86-64-v2/v3/v4 as in the psABI), plus the extensions
// ggml's kernels use. The flags that build each are in the Makefile.
var (
	v2   = []string{"sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "cx16"}
	v3   = append(slices.Clone(v2), "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "lzcnt", "movbe", "osxsave")
	v4   = append(slices.Clone(v3), "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512vnni", "avx512vbmi")
	tile = append(slices.Clone(v4), "avx512bf16", "amx-tile", "amx-int8", "amx-bf16")
)

// Variants lists every runner build for an architecture, best first.
func Variants(goarch string) []Variant {
	switch goarch {
	case "amd64":
		return []Variant{
			{Name: "amx", Needs: tile, OptIn: true,
				About: "AVX-512 + AMX tiles (Intel Sapphire Rapids and later); ggml uses AMX only for matrices whose input width is a multiple of 2,048"},
			{Name: "avx512", Needs: v4, About: "AVX-512 with VNNI and VBMI (Intel Ice Lake and later, AMD Zen 4 and later)"},
			{Name: "avx2", Needs: v3, About: "x86-64-v3: AVX2, FMA, F16C (Intel Haswell 2013+, AMD Zen)"},
			{Name: "sse4", Needs: v2, About: "x86-64-v2: SSE4.2 (any 64-bit PC of the last 15 years); slow"},
		}
	case "arm64":
		return []Variant{{Name: "arm64", About: "ARMv8 NEON; Metal on Apple silicon"}}
	}
	return []Variant{{Name: "generic", About: "the compiler's defaults"}}
}

// Features is the set of CPU features present.
type Features map[string]bool

func (f Features) has(v Variant) bool {
	for _, n := range v.Needs {
		if !f[n] {
			return false
		}
	}
	return true
}

// String lists the features present, sorted.
func (f Features) String() string {
	var names []string
	for n, ok := range f {
		if ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return strings.Join(names, " ")
}

// Supported returns the variants this CPU can run, best first (opt-in ones
// included).
func Supported(vs []Variant, f Features) []Variant {
	var out []Variant
	for _, v := range vs {
		if f.has(v) {
			out = append(out, v)
		}
	}
	return out
}

// ErrNoRunner means no installed runner suits this CPU.
var ErrNoRunner = errors.New("no model runner for this CPU")

// Pick chooses among the installed variants: the named one if want is set
// (it must be installed and supported), else the best supported one that is
// not opt-in.
func Pick(vs []Variant, f Features, installed []string, want string) (Variant, error) {
	if want != "" {
		i := slices.IndexFunc(vs, func(v Variant) bool { return v.Name == want })
		switch {
		case i < 0:
			return Variant{}, fmt.Errorf("%w: unknown CPU variant %q (known: %s)", ErrNoRunner, want, names(vs))
		case !f.has(vs[i]):
			return Variant{}, fmt.Errorf("%w: this CPU cannot run the %q variant (it lacks %s)", ErrNoRunner, want, strings.Join(missing(vs[i], f), " "))
		case !slices.Contains(installed, want):
			return Variant{}, fmt.Errorf("%w: the %q variant is not installed (installed: %s)", ErrNoRunner, want, strings.Join(installed, ", "))
		}
		return vs[i], nil
	}
	for _, v := range Supported(vs, f) {
		if !v.OptIn && slices.Contains(installed, v.Name) {
			return v, nil
		}
	}
	if len(installed) == 0 {
		return Variant{}, fmt.Errorf("%w: none is installed", ErrNoRunner)
	}
	for _, v := range Supported(vs, f) {
		if v.OptIn && slices.Contains(installed, v.Name) {
			return Variant{}, fmt.Errorf("%w: only %q is installed, and it is opt-in: set LORE_CPU_VARIANT=%s, or build another", ErrNoRunner, v.Name, v.Name)
		}
	}
	return Variant{}, fmt.Errorf("%w: installed %s, but this CPU runs only %s", ErrNoRunner,
		strings.Join(installed, ", "), names(Supported(vs, f)))
}

func missing(v Variant, f Features) []string {
	var out []string
	for _, n := range v.Needs {
		if !f[n] {
			out = append(out, n)
		}
	}
	return out
}

func names(vs []Variant) string {
	if len(vs) == 0 {
		return "none"
	}
	var s []string
	for _, v := range vs {
		s = append(s, v.Name)
	}
	return strings.Join(s, ", ")
}

// Runner is the runner program chosen for this machine.
type Runner struct {
	Path    string
	Variant Variant
	// Installed lists the variants found beside it (also set when
	// FindRunner fails because none of them suits).
	Installed []string
}

// RunnerPrefix starts every runner file name: lore-runner-<variant>[.exe].
const RunnerPrefix = "lore-runner-"

// Dirs are the folders searched for runners, in order: $LORE_RUNNER_DIR, the
// executable's folder, and ../lib/lore beside it (a Unix install).
func Dirs() []string {
	var dirs []string
	if d := os.Getenv("LORE_RUNNER_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		dirs = append(dirs, filepath.Dir(exe), filepath.Join(filepath.Dir(exe), "..", "lib", "lore"))
	}
	return dirs
}

// Installed lists the runner variants in dir.
func Installed(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		name := strings.TrimSuffix(e.Name(), ".exe")
		if v, ok := strings.CutPrefix(name, RunnerPrefix); ok && !e.IsDir() {
			out = append(out, v)
		}
	}
	return out
}

// FindRunner picks the runner for this CPU from the first folder of dirs
// that holds any. want ($LORE_CPU_VARIANT) forces a variant.
func FindRunner(dirs []string, f Features, want string) (Runner, error) {
	vs := Variants(runtime.GOARCH)
	for _, dir := range dirs {
		inst := Installed(dir)
		if len(inst) == 0 {
			continue
		}
		v, err := Pick(vs, f, inst, want)
		if err != nil {
			return Runner{Installed: inst}, fmt.Errorf("%w (in %s)", err, dir)
		}
		exe := RunnerPrefix + v.Name
		if runtime.GOOS == "windows" {
			exe += ".exe"
		}
		return Runner{Path: filepath.Join(dir, exe), Variant: v, Installed: inst}, nil
	}
	return Runner{}, fmt.Errorf("%w: no %s* program in %s (build one with `make build`, or set LORE_RUNNER_DIR)",
		ErrNoRunner, RunnerPrefix, strings.Join(dirs, ", "))
}

// Default finds the runner for this machine in the usual folders.
func Default() (Runner, error) {
	return FindRunner(Dirs(), Detect(), os.Getenv("LORE_CPU_VARIANT"))
}

// Best is the variant to build for this CPU: the best supported one that is
// not opt-in, whether or not it is installed.
func Best(f Features) Variant {
	vs := Variants(runtime.GOARCH)
	for _, v := range Supported(vs, f) {
		if !v.OptIn {
			return v
		}
	}
	return vs[len(vs)-1]
}

// Status describes this machine's runner choice, for `lore cpu` and the
// Models view.
type Status struct {
	Features string          `json:"features"`
	Variants []VariantStatus `json:"variants"`
	Best     string          `json:"best"`    // what `make build` compiles here
	Runner   string          `json:"runner"`  // the program models start with ("" if none)
	Variant  string          `json:"variant"` // its variant
	Error    string          `json:"error,omitempty"`
}

// VariantStatus is one variant on this machine.
type VariantStatus struct {
	Name      string `json:"name"`
	About     string `json:"about"`
	OptIn     bool   `json:"opt_in"`
	Supported bool   `json:"supported"`
	Installed bool   `json:"installed"`
}

// Describe reports the features, the variants and the runner Default picks.
func Describe() Status {
	f := Detect()
	st := Status{Features: f.String(), Best: Best(f).Name}
	r, err := Default()
	if err != nil {
		st.Error = err.Error()
	} else {
		st.Runner, st.Variant = r.Path, r.Variant.Name
	}
	for _, v := range Variants(runtime.GOARCH) {
		st.Variants = append(st.Variants, VariantStatus{Name: v.Name, About: v.About, OptIn: v.OptIn,
			Supported: f.has(v), Installed: slices.Contains(r.Installed, v.Name)})
	}
	return st
}
