package cpu

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func features(names ...[]string) Features {
	f := Features{}
	for _, ns := range names {
		for _, n := range ns {
			f[n] = true
		}
	}
	return f
}

func TestPick(t *testing.T) {
	vs := Variants("amd64")
	zen4 := features(v4, []string{"avx512bf16"})
	spr := features(tile)
	haswell := features(v3)
	old := features(v2)
	all := []string{"amx", "avx512", "avx2", "sse4"}
	for _, c := range []struct {
		name      string
		f         Features
		installed []string
		want      string // LORE_CPU_VARIANT
		pick      string
		err       string
	}{
		{"AVX-512 CPU takes avx512", zen4, all, "", "avx512", ""},
		{"AMX CPU takes avx512 by default (amx is opt-in)", spr, all, "", "avx512", ""},
		{"AMX CPU takes amx when asked", spr, all, "amx", "amx", ""},
		{"AVX2-only CPU takes avx2", haswell, all, "", "avx2", ""},
		{"old CPU falls back to sse4", old, all, "", "sse4", ""},
		{"only the fallback installed", zen4, []string{"avx2"}, "", "avx2", ""},
		{"forced fallback on a fast CPU", zen4, all, "avx2", "avx2", ""},
		{"AVX-512 asked of an AVX2 CPU", haswell, all, "avx512", "", "lacks avx512f"},
		{"amx asked of a Zen 4", zen4, all, "amx", "", "lacks amx-tile"},
		{"unknown name", zen4, all, "native", "", `unknown CPU variant "native"`},
		{"asked but not installed", zen4, []string{"avx2"}, "avx512", "", "not installed"},
		{"nothing this CPU runs", old, []string{"avx2", "avx512"}, "", "", "this CPU runs only sse4"},
		{"nothing installed", zen4, nil, "", "", "none is installed"},
		{"only the opt-in build installed", spr, []string{"amx"}, "", "", "LORE_CPU_VARIANT=amx"},
		{"a CPU without AVX-512 VNNI is not avx512", features(v3, []string{"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}), all, "", "avx2", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := Pick(vs, c.f, c.installed, c.want)
			if c.err != "" {
				if err == nil || !errors.Is(err, ErrNoRunner) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want ErrNoRunner containing %q", err, c.err)
				}
				return
			}
			if err != nil || v.Name != c.pick {
				t.Fatalf("Pick = %q, %v; want %q", v.Name, err, c.pick)
			}
		})
	}
}

// Each level includes the one below, so "best first" is also "most demanding first".
func TestVariantsNest(t *testing.T) {
	vs := Variants("amd64")
	for i := 1; i < len(vs); i++ {
		for _, n := range vs[i].Needs {
			if !slices.Contains(vs[i-1].Needs, n) {
				t.Errorf("%s needs %s but %s, above it, does not", vs[i].Name, n, vs[i-1].Name)
			}
		}
	}
}

// The Makefile builds exactly the variants listed here, each with flags.
func TestMakefileBuildsEveryVariant(t *testing.T) {
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	mk := string(b)
	for _, arch := range []string{"amd64", "arm64"} {
		m := regexp.MustCompile(`(?m)^RUNNER_VARIANTS_` + arch + `\s*:=\s*(.*)$`).FindStringSubmatch(mk)
		if m == nil {
			t.Fatalf("Makefile has no RUNNER_VARIANTS_%s", arch)
		}
		var want []string
		for _, v := range Variants(arch) {
			want = append(want, v.Name)
			if !regexp.MustCompile(`(?m)^FLAGS_` + v.Name + `\s*:?=`).MatchString(mk) {
				t.Errorf("Makefile has no FLAGS_%s", v.Name)
			}
		}
		if got := strings.Fields(m[1]); !slices.Equal(got, want) {
			t.Errorf("RUNNER_VARIANTS_%s = %v, want %v", arch, got, want)
		}
	}
}

func TestFindRunner(t *testing.T) {
	empty, full := t.TempDir(), t.TempDir()
	exe := ""
	if runtime.GOOS == "windows" {
		exe = ".exe"
	}
	vs := Variants(runtime.GOARCH)
	for _, v := range vs {
		os.WriteFile(filepath.Join(full, RunnerPrefix+v.Name+exe), nil, 0o755)
	}
	os.WriteFile(filepath.Join(full, "lore"), nil, 0o755)
	all := Features{}
	for _, v := range vs {
		for _, n := range v.Needs {
			all[n] = true
		}
	}
	r, err := FindRunner([]string{filepath.Join(empty, "missing"), empty, full}, all, "")
	if err != nil {
		t.Fatal(err)
	}
	best := Supported(vs, all)[0]
	if best.OptIn {
		best = Supported(vs, all)[1]
	}
	if r.Variant.Name != best.Name || r.Path != filepath.Join(full, RunnerPrefix+best.Name+exe) || len(r.Installed) != len(vs) {
		t.Fatalf("FindRunner = %+v, want %s in %s", r, best.Name, full)
	}
	if _, err := FindRunner([]string{empty}, all, ""); !errors.Is(err, ErrNoRunner) || !strings.Contains(err.Error(), "make build") {
		t.Fatalf("empty folder: %v", err)
	}
	// A folder whose builds this CPU cannot run still says what it holds (lore cpu lists it).
	if r, err := FindRunner([]string{full}, Features{}, vs[0].Name); len(vs[0].Needs) > 0 && (err == nil || len(r.Installed) != len(vs)) {
		t.Fatalf("unsuitable folder: %+v, %v; want an error and the %d installed builds", r, err, len(vs))
	}
}

func TestDetect(t *testing.T) {
	f := Detect()
	if runtime.GOARCH == "amd64" && !f["sse3"] {
		t.Fatalf("an x86-64 CPU without SSE3? %v", f)
	}
	// Whatever this machine is, some variant must run on it.
	if len(Supported(Variants(runtime.GOARCH), f)) == 0 {
		t.Fatalf("no variant supports this CPU (%v)", f)
	}
}
