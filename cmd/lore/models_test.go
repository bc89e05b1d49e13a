package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"lore/weights"
)

// TestModelsListsStores lays the real SmolLM2 file out in Ollama's store and
// LM Studio's and Hugging Face's caches (hard links, so the file is not
// copied, unless the temporary folder is on another file system) and checks what `lore models` prints for each. The rule on the
// missing file is weights.Require's.
func TestModelsListsStores(t *testing.T) {
	model, sha := weights.Require(t, weights.SmolLM2), weights.SmolLM2.Parts[0].SHA256

	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("LORE_MODELS", t.TempDir())
	for _, k := range []string{"OLLAMA_MODELS", "HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME"} {
		t.Setenv(k, "")
	}
	put := func(path, link string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if link == "" {
			linkOrCopy(t, model, path)
		} else if err := os.Symlink(link, path); err != nil {
			t.Fatal(err)
		}
	}
	ollama := filepath.Join(home, ".ollama", "models")
	put(filepath.Join(ollama, "blobs", "sha256-"+sha), "")
	manifest := filepath.Join(ollama, "manifests", "registry.ollama.ai", "library", "smollm2", "135m")
	if err := os.MkdirAll(filepath.Dir(manifest), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(manifest, []byte(`{"schemaVersion":2,"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:`+sha+`"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	put(filepath.Join(home, ".lmstudio", "models", "lmstudio-community", "SmolLM2-135M-Instruct-GGUF", "SmolLM2-135M-Instruct-Q4_1.gguf"), "")
	hf := filepath.Join(home, ".cache", "huggingface", "hub", "models--HuggingFaceTB--SmolLM2-135M-Instruct-GGUF")
	put(filepath.Join(hf, "blobs", sha), "")
	put(filepath.Join(hf, "snapshots", "0123456789abcdef0123456789abcdef01234567", "smollm2-135m-instruct-q4_1.gguf"), "../../blobs/"+sha)

	_, out, errOut := cli(t, "models", "--data", t.TempDir())
	if errOut != "" && !strings.Contains(errOut, "runner") {
		t.Errorf("stderr: %s", errOut)
	}
	// NAME SOURCE KIND ARCH QUANT SIZE-MB CONTEXT RAM-MB FITS PATH
	for _, want := range []string{
		`smollm2:135m +ollama +chat +llama +Q4_1 +93 +8192 +\d{3} +yes +` + regexp.QuoteMeta(ollama),
		`lmstudio-community/SmolLM2-135M-Instruct-GGUF +lmstudio +chat +llama +Q4_1 +93 +8192 +\d{3} +yes `,
		`HuggingFaceTB/SmolLM2-135M-Instruct-GGUF +huggingface +chat +llama +Q4_1 +93 +8192 +\d{3} +yes +` + regexp.QuoteMeta(hf),
	} {
		if !regexp.MustCompile(`(?m)^` + want).MatchString(out) {
			t.Errorf("no line matching %s in\n%s", want, out)
		}
	}
}

// linkOrCopy puts src at dst as a hard link, or a copy where the two
// folders are on different file systems (app/models_real_test.go's).
func linkOrCopy(t *testing.T, src, dst string) {
	t.Helper()
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
