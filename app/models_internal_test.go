package app

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// TestModelStores checks where each tool's models are looked for, from the
// home folder and the environment.
func TestModelStores(t *testing.T) {
	home := t.TempDir()
	service := []string{}
	if runtime.GOOS == "linux" {
		service = []string{"/usr/share/ollama/.ollama/models"}
	}
	j := func(elem ...string) string { return filepath.Join(append([]string{home}, elem...)...) }
	tests := []struct {
		name  string
		env   map[string]string
		setup func(t *testing.T)
		want  stores
	}{
		{"defaults", nil, nil, stores{
			Ollama:      append([]string{j(".ollama", "models")}, service...),
			LMStudio:    []string{j(".lmstudio", "models"), j(".cache", "lm-studio", "models")},
			HuggingFace: []string{j(".cache", "huggingface", "hub")},
		}},
		{"environment first", map[string]string{"OLLAMA_MODELS": "/srv/ollama", "HF_HUB_CACHE": "/srv/hub",
			"HUGGINGFACE_HUB_CACHE": "/old/hub", "HF_HOME": "/srv/hf", "XDG_CACHE_HOME": "/srv/cache"}, nil, stores{
			Ollama:      append([]string{"/srv/ollama", j(".ollama", "models")}, service...),
			LMStudio:    []string{j(".lmstudio", "models"), j(".cache", "lm-studio", "models")},
			HuggingFace: []string{"/srv/hub", "/old/hub", "/srv/hf/hub", "/srv/cache/huggingface/hub", j(".cache", "huggingface", "hub")},
		}},
		{"relative or repeated folders are left out", map[string]string{"OLLAMA_MODELS": "models", "HF_HOME": j(".cache", "huggingface")}, nil, stores{
			Ollama:      append([]string{j(".ollama", "models")}, service...),
			LMStudio:    []string{j(".lmstudio", "models"), j(".cache", "lm-studio", "models")},
			HuggingFace: []string{j(".cache", "huggingface", "hub")},
		}},
		{"lm studio's home pointer and downloads folder", nil, func(t *testing.T) {
			os.WriteFile(j(".lmstudio-home-pointer"), []byte(j("lms")+"\n"), 0o644)
			os.MkdirAll(j("lms"), 0o755)
			os.WriteFile(j("lms", "settings.json"), []byte(`{"downloadsFolder":"/mnt/models","other":1}`), 0o644)
		}, stores{
			Ollama:      append([]string{j(".ollama", "models")}, service...),
			LMStudio:    []string{j("lms", "models"), "/mnt/models", j(".lmstudio", "models"), j(".cache", "lm-studio", "models")},
			HuggingFace: []string{j(".cache", "huggingface", "hub")},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				tt.setup(t)
			}
			got := modelStores(home, func(k string) string { return tt.env[k] })
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestFindModelsNames checks the names given to files in each store, and
// what is left out: later parts of split models, Ollama layers that are not
// the model, digests that are not sha256 hex.
func TestFindModelsNames(t *testing.T) {
	root := t.TempDir()
	touch := func(rel string) string {
		p := filepath.Join(root, filepath.FromSlash(rel))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sha := strings.Repeat("ab", 32)
	touch("ollama/blobs/sha256-" + sha)
	manifest := func(rel, digest string) {
		os.WriteFile(touch("ollama/manifests/"+rel), []byte(`{"layers":[
		  {"mediaType":"application/vnd.ollama.image.template","digest":"sha256:`+strings.Repeat("cd", 32)+`"},
		  {"mediaType":"application/vnd.ollama.image.model","digest":"`+digest+`"}]}`), 0o644)
	}
	manifest("registry.ollama.ai/library/qwen3/0.6b", "sha256:"+sha)
	manifest("registry.ollama.ai/someone/tiny/latest", "sha256:"+sha)
	manifest("hf.co/org/Repo-GGUF/Q4_K_M", "sha256:"+sha)
	manifest("registry.ollama.ai/library/evil/latest", "sha256:../../../etc/passwd")
	touch("lore/mine.gguf")
	touch("lms/pub/one-GGUF/one-Q8_0.gguf")
	touch("lms/pub/two-GGUF/two-Q4_K_M.gguf")
	touch("lms/pub/two-GGUF/mmproj-two-F16.gguf")
	touch("lms/pub/big-GGUF/big-Q4_K_M-00001-of-00002.gguf")
	touch("lms/pub/big-GGUF/big-Q4_K_M-00002-of-00002.gguf")
	touch("lms/pub/big-GGUF/notes.txt")
	snap := "hub/models--org--repo/snapshots/" + strings.Repeat("0", 40) + "/"
	touch(snap + "repo.Q4_0.gguf")
	touch("hub/models--org--multi/snapshots/r1/Q8_0/multi-Q8_0.gguf")
	touch("hub/models--gpt2/snapshots/r1/gpt2.gguf")
	touch("hub/datasets--org--data/snapshots/r1/data.gguf")

	got := map[string]string{}
	for _, f := range findModels(context.Background(), []string{filepath.Join(root, "lore")}, stores{
		Ollama:      []string{filepath.Join(root, "ollama")},
		LMStudio:    []string{filepath.Join(root, "lms")},
		HuggingFace: []string{filepath.Join(root, "hub")},
	}) {
		rel, _ := filepath.Rel(root, f.path)
		got[f.source+" "+f.name] = filepath.ToSlash(rel)
	}
	blob := "ollama/blobs/sha256-" + sha
	want := map[string]string{
		"lore mine":                             "lore/mine.gguf",
		"ollama qwen3:0.6b":                     blob,
		"ollama someone/tiny:latest":            blob,
		"ollama hf.co/org/Repo-GGUF:Q4_K_M":     blob,
		"lmstudio pub/one-GGUF":                 "lms/pub/one-GGUF/one-Q8_0.gguf",
		"lmstudio pub/two-GGUF/two-Q4_K_M":      "lms/pub/two-GGUF/two-Q4_K_M.gguf",
		"lmstudio pub/two-GGUF/mmproj-two-F16":  "lms/pub/two-GGUF/mmproj-two-F16.gguf",
		"lmstudio pub/big-GGUF":                 "lms/pub/big-GGUF/big-Q4_K_M-00001-of-00002.gguf",
		"huggingface org/repo":                  snap + "repo.Q4_0.gguf",
		"huggingface org/multi/Q8_0/multi-Q8_0": "hub/models--org--multi/snapshots/r1/Q8_0/multi-Q8_0.gguf",
		"huggingface gpt2":                      "hub/models--gpt2/snapshots/r1/gpt2.gguf",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%v\nwant\n%v", got, want)
	}
}
