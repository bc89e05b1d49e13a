package engine_test

import (
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"lore/engine"
	"lore/engine/cpu"
)

// TestVariants loads the chat model with every runner program in
// LORE_RUNNER_DIR that this CPU can run (`make test` builds this machine's
// variant and the avx2 fallback), and with the one Open picks by itself.
func TestVariants(t *testing.T) {
	dir := os.Getenv("LORE_RUNNER_DIR")
	if dir == "" {
		t.Skip("LORE_RUNNER_DIR is not set: `make test` builds the runners in bin/ and sets it")
	}
	f, vs, inst := cpu.Detect(), cpu.Variants(runtime.GOARCH), cpu.Installed(dir)
	def, err := cpu.Pick(vs, f, inst, "")
	if err != nil {
		t.Fatal(err)
	}
	var runnable []string
	for _, v := range cpu.Supported(vs, f) {
		if slices.Contains(inst, v.Name) {
			runnable = append(runnable, v.Name)
		}
	}
	chat, _ := models(t)
	for _, name := range append([]string{""}, runnable...) {
		t.Run("variant="+name, func(t *testing.T) {
			t.Setenv("LORE_CPU_VARIANT", name)
			t.Setenv("LORE_TEST_RUNNER", "") // the real program, not this test binary
			m, err := engine.Open(engine.Options{Path: chat, NumCtx: 512, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			want := name
			if want == "" {
				want = def.Name
			}
			if got := m.Info().CPUVariant; got != want {
				t.Errorf("CPUVariant = %q, want %q", got, want)
			}
			text, _, st := generate(t, m, "The quick brown fox", 8)
			if text == "" || st.PromptTokens == 0 || st.EvalTokens == 0 {
				t.Fatalf("generate: text %q, stats %+v", text, st)
			}
			ri := m.Runner()
			if !strings.Contains(ri.System, "CPU") || len(ri.Buffers) == 0 {
				t.Errorf("runner info %+v: want llama.cpp's system line and weight buffers", ri)
			}
			// The variant's flags reached the compiler: llama.cpp reports what it was built with.
			for _, c := range compiledWith[want] {
				if strings.Contains(ri.System, c.text) != c.present {
					t.Errorf("%s build: system line %q, want %q present=%v", want, ri.System, c.text, c.present)
				}
			}
		})
	}
}

// compiledWith is what llama.cpp's system line must (not) say for each build.
var compiledWith = map[string][]struct {
	text    string
	present bool
}{
	"amx":    {{"AVX512=1", true}, {"AMX_INT8=1", true}},
	"avx512": {{"AVX512=1", true}, {"AVX512_VNNI=1", true}, {"AMX_INT8=1", false}},
	"avx2":   {{"AVX2=1", true}, {"FMA=1", true}, {"AVX512=1", false}},
	"sse4":   {{"SSSE3=1", true}, {"CPU.0.AVX=1", false}},
}
