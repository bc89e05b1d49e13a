package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"lore/app"
	"lore/app/server"
)

// TestOpenAIErrors: a generation that fails is reported the way OpenAI
// clients read it. Not streaming: an error status with an error object,
// never a 200 with a partial answer. Streaming, after content has gone
// out: a final error object, with no finish_reason "stop" and no [DONE],
// so the client does not take a broken answer for a complete one.
//
// The failure is real: the chat model's runner is killed mid-answer and
// its file replaced by garbage, so it cannot come back (the engine checks
// the file before every load).
func TestOpenAIErrors(t *testing.T) {
	chat, _, _ := fixtures(t)
	model := filepath.Join(t.TempDir(), "chat.gguf")
	copyFile(t, chat, model)
	e := newEnv(t, app.Config{ChatModel: model}, server.Options{})
	e.setMaxTokens(t, 2000)

	// Streaming: read a few content chunks, then break the model.
	body := map[string]any{"model": "lore", "stream": true, "max_tokens": 2000,
		"messages": []map[string]string{{"role": "user", "content": "tell me everything about the river market"}}}
	resp, err := e.client.Do(e.req(t, "POST", "/v1/chat/completions", body).WithContext(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: %d %s", resp.StatusCode, b)
	}
	br := bufio.NewReader(resp.Body)
	var datas []string
	content := 0
	for content < 3 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended after %d lines before 3 content chunks: %v", len(datas), err)
		}
		if d, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
			datas = append(datas, d)
			if strings.Contains(d, `"content"`) {
				content++
			}
		}
	}
	breakModel(t, model, runnerOf(t, model)) // the runner answering now
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("reading the rest of the stream: %v", err)
	}
	for _, line := range strings.Split(string(rest), "\n") {
		if d, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
			datas = append(datas, d)
		}
	}
	last := datas[len(datas)-1]
	var tail struct {
		Error *struct {
			Message, Type string
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(last), &tail); err != nil || tail.Error == nil || tail.Error.Message == "" || tail.Error.Type == "" {
		t.Errorf("the failed stream's last data is %q, want an error object", last)
	}
	for _, d := range datas {
		if d == "[DONE]" {
			t.Error("a failed stream ended with [DONE]")
		}
		if strings.Contains(d, `"finish_reason":"stop"`) {
			t.Errorf("a failed stream reported finish_reason stop: %s", d)
		}
	}
	if tail.Error != nil {
		t.Logf("stream error after %d content chunks: %s", content, tail.Error.Message)
	}

	// Not streaming, with the model now unusable: a status and an error
	// object, no choices.
	for _, stream := range []bool{false, true} {
		body["stream"] = stream
		resp, err := e.client.Do(e.req(t, "POST", "/v1/chat/completions", body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var reply struct {
			Choices []json.RawMessage `json:"choices"`
			Error   *struct {
				Message, Type string
			} `json:"error"`
		}
		json.Unmarshal(b, &reply)
		if resp.StatusCode < 500 || reply.Error == nil || reply.Error.Message == "" || reply.Choices != nil {
			t.Errorf("stream=%v with a broken model: %d %s; want 5xx with an error object and no choices", stream, resp.StatusCode, b)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("stream=%v: Content-Type %q", stream, ct)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// runnerOf finds the runner process that has the model file mapped: a
// child of this test process (runners load models with mmap, and start on
// first use).
func runnerOf(t *testing.T, model string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ents, _ := os.ReadDir("/proc")
		for _, ent := range ents {
			pid, err := strconv.Atoi(ent.Name())
			if err != nil || ppid(pid) != os.Getpid() {
				continue
			}
			if maps, err := os.ReadFile("/proc/" + ent.Name() + "/maps"); err == nil && bytes.Contains(maps, []byte(model)) {
				return pid
			}
		}
		if time.Now().After(deadline) {
			for _, ent := range ents {
				pid, err := strconv.Atoi(ent.Name())
				if err != nil || ppid(pid) != os.Getpid() {
					continue
				}
				maps, _ := os.ReadFile("/proc/" + ent.Name() + "/maps")
				cmd, _ := os.ReadFile("/proc/" + ent.Name() + "/cmdline")
				for _, l := range strings.Split(string(maps), "\n") {
					if strings.Contains(l, "gguf") {
						t.Logf("%d %q: %s", pid, cmd, l)
					}
				}
				t.Logf("child %d %q", pid, cmd)
			}
			t.Fatalf("no runner process has %s mapped", model)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func ppid(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	// pid (comm) state ppid …; comm may hold spaces and parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 2 {
		return -1
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// breakModel replaces the model file with garbage (by rename: the runner
// keeps its mapping of the old file) and kills its runner.
func breakModel(t *testing.T, model string, pid int) {
	t.Helper()
	tmp := model + ".garbage"
	if err := os.WriteFile(tmp, []byte("this is not a GGUF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, model); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill runner %d: %v", pid, err)
	}
}
