package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// ollamaPrefill is a real `ollama serve` on loopback, in a folder of its
// own, serving the model file bench engine measures: the guard that Lore's
// runner reads a cold prompt faster than the engine users would otherwise
// run.
type ollamaPrefill struct {
	addr string
	cmd  *exec.Cmd
	dir  string
}

const ollamaBenchModel = "lore-bench"

// startOllama starts bin serving model (a GGUF file) and creates it there,
// with flash attention as bench engine's --flash-attention says.
func startOllama(ctx context.Context, bin, model, flash string) (*ollamaPrefill, error) {
	dir, err := os.MkdirTemp("", "lore-bench-ollama-")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	o := &ollamaPrefill{addr: ln.Addr().String(), dir: dir}
	ln.Close()
	env := append(os.Environ(), "OLLAMA_HOST="+o.addr, "OLLAMA_MODELS="+filepath.Join(dir, "models"), "HOME="+dir,
		"OLLAMA_NUM_PARALLEL=1", "OLLAMA_KEEP_ALIVE=10m")
	switch flash {
	case "on":
		env = append(env, "OLLAMA_FLASH_ATTENTION=1")
	case "off":
		env = append(env, "OLLAMA_FLASH_ATTENTION=0")
	}
	log, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer log.Close()
	o.cmd = exec.Command(bin, "serve")
	o.cmd.Env, o.cmd.Stdout, o.cmd.Stderr = env, log, log
	o.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its model runners die with it
	if err := o.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("ollama serve: %w", err)
	}
	fail := func(err error) (*ollamaPrefill, error) {
		b, _ := os.ReadFile(log.Name())
		o.stop()
		return nil, fmt.Errorf("%w\n%s", err, tailText(string(b), 1500))
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		r, err := http.Get("http://" + o.addr + "/")
		if err == nil {
			r.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			return fail(errors.New("ollama serve did not answer within 30 s"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	mf := filepath.Join(dir, "Modelfile")
	if err := os.WriteFile(mf, []byte("FROM "+model+"\n"), 0o644); err != nil {
		return fail(err)
	}
	create := exec.CommandContext(ctx, bin, "create", ollamaBenchModel, "-f", mf)
	create.Env = env
	if out, err := create.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("ollama create: %w: %s", err, tailText(string(out), 500)))
	}
	return o, nil
}

// prefill reads prompt raw (no template) and returns Ollama's own count
// and speed of the prompt's evaluation.
func (o *ollamaPrefill) prefill(ctx context.Context, prompt string, threads, numCtx int) (tokens int, tokS float64, err error) {
	body, _ := json.Marshal(map[string]any{"model": ollamaBenchModel, "prompt": prompt, "raw": true, "stream": false,
		"options": map[string]any{"num_predict": 1, "num_thread": threads, "num_ctx": numCtx, "temperature": 0}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+o.addr+"/api/generate", bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("ollama generate: %w", err)
	}
	defer resp.Body.Close()
	var r struct {
		Error              string `json:"error"`
		PromptEvalCount    int    `json:"prompt_eval_count"`
		PromptEvalDuration int64  `json:"prompt_eval_duration"` // ns
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, 0, fmt.Errorf("ollama generate: %s: %w", resp.Status, err)
	}
	if r.Error != "" || resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("ollama generate: %s: %s", resp.Status, r.Error)
	}
	if r.PromptEvalDuration <= 0 {
		return 0, 0, errors.New("ollama generate: no prompt evaluation reported")
	}
	return r.PromptEvalCount, float64(r.PromptEvalCount) / (float64(r.PromptEvalDuration) / 1e9), nil
}

// stop kills the server and its runners and removes its folder.
func (o *ollamaPrefill) stop() {
	syscall.Kill(-o.cmd.Process.Pid, syscall.SIGKILL)
	o.cmd.Wait()
	os.RemoveAll(o.dir)
}

func tailText(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
