package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lore/app"
	"lore/app/server"
)

// TestReadDeadlines: a client that sends its request slowly is cut off
// once ReadTimeout has passed, so it cannot hold a connection (and a
// goroutine) for ever. The bound checked is generous: without a deadline
// the connection stays open until the client gives up.
func TestReadDeadlines(t *testing.T) {
	const readTimeout = 300 * time.Millisecond
	e := newEnv(t, app.Config{}, server.Options{ReadTimeout: readTimeout})
	auth := "Authorization: Bearer " + e.token + "\r\n"
	host := fmt.Sprintf("Host: 127.0.0.1:%d\r\n", e.port)
	cases := []struct {
		name, send string
		want       int // status, 0: the connection is closed without one
	}{
		{"body slower than the deadline", "POST /api/ask HTTP/1.1\r\n" + host + auth +
			"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"question\": \"ri", http.StatusRequestTimeout},
		{"settings body slower than the deadline", "PUT /api/settings HTTP/1.1\r\n" + host + auth +
			"Content-Length: 50\r\n\r\n{\"max_tok", http.StatusRequestTimeout},
		{"openai body slower than the deadline", "POST /v1/chat/completions HTTP/1.1\r\n" + host + auth +
			"Content-Length: 80\r\n\r\n{\"messages\": [", http.StatusRequestTimeout},
		{"headers slower than the deadline", "GET /api/workspaces HTTP/1.1\r\n" + host + "X-Slow: a", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", e.ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, c.send); err != nil {
				t.Fatal(err)
			}
			// The rest never comes. Generous: 100 times the deadline.
			conn.SetReadDeadline(time.Now().Add(100 * readTimeout))
			t0 := time.Now()
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			switch {
			case err != nil && isTimeout(err):
				t.Fatalf("no reply and still open after %v: the server waits for the request for ever", time.Since(t0))
			case err != nil && c.want != 0:
				t.Fatalf("connection closed without the %d reply: %v", c.want, err)
			case err != nil: // closed without a reply: what net/http does for slow headers
				t.Logf("closed after %v", time.Since(t0))
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.want, b)
			}
			t.Logf("%d after %v: %s", resp.StatusCode, time.Since(t0), strings.TrimSpace(string(b)))
		})
	}
	// An ordinary request on the same server is not affected.
	if code := e.do(t, e.req(t, "PUT", "/api/settings", map[string]int{"max_tokens": 16}), nil); code != 200 {
		t.Errorf("a prompt request after the slow ones: %d", code)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestProgressStreamCap: progress subscriptions beyond the cap get 429;
// a closed stream frees its place; open streams outlive ReadTimeout and
// get the run's end.
func TestProgressStreamCap(t *testing.T) {
	const limit = 2
	const readTimeout = 300 * time.Millisecond
	e := newEnv(t, app.Config{}, server.Options{MaxProgressStreams: limit, ReadTimeout: readTimeout})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "held.md"), []byte("# Held\n\nA run held open by the test.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A run that stays open until the test lets it go: its progress
	// callback blocks (the run is "running" from before the first call).
	started, release := make(chan struct{}), make(chan struct{})
	indexed := make(chan error, 1)
	first := true
	go func() {
		_, err := e.app.Index(context.Background(), "default", []string{dir}, func(app.Progress) {
			if first {
				first = false
				close(started)
				<-release
			}
		})
		indexed <- err
	}()
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	select {
	case <-started:
	case err := <-indexed:
		t.Fatalf("the run ended before its first progress: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("no progress from the run within 60 s")
	}

	type stream struct {
		resp   *http.Response
		cancel context.CancelFunc
		events chan event
	}
	open := func() (*stream, int, []byte) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		resp, err := e.client.Do(e.req(t, "GET", "/api/workspaces/default/progress", nil).WithContext(ctx))
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			cancel()
			return nil, resp.StatusCode, b
		}
		st := &stream{resp: resp, cancel: cancel, events: make(chan event, 64)}
		go func() {
			defer close(st.events)
			readSSE(resp.Body, func(ev event) bool { st.events <- ev; return true })
		}()
		// The stream is live once its first event (the running state) came.
		select {
		case ev := <-st.events:
			if ev.name != "progress" {
				t.Fatalf("first event %q %s, want progress (the run is held open)", ev.name, ev.data)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no first event on a progress stream")
		}
		return st, 200, nil
	}
	var streams []*stream
	for range limit {
		st, code, b := open()
		if code != 200 {
			t.Fatalf("stream %d of %d: %d %s", len(streams)+1, limit, code, b)
		}
		streams = append(streams, st)
	}
	defer func() {
		for _, st := range streams {
			st.cancel()
			st.resp.Body.Close()
		}
	}()
	st, code, b := open()
	if code != http.StatusTooManyRequests {
		if st != nil {
			streams = append(streams, st)
		}
		t.Fatalf("stream %d with a cap of %d: %d, want 429", limit+1, limit, code)
	}
	var eb struct{ Error string }
	if json.Unmarshal(b, &eb) != nil || eb.Error == "" {
		t.Errorf("429 body %q", b)
	}
	// The read-ahead status stream counts with them.
	if resp, err := e.client.Do(e.req(t, "GET", "/api/prefetch/events", nil)); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("read-ahead stream with every place taken: %d, want 429", resp.StatusCode)
		}
	}

	// Closing one frees its place (the handler notices the client leave).
	streams[0].cancel()
	streams[0].resp.Body.Close()
	streams = streams[1:]
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, code, b := open()
		if code == 200 {
			streams = append(streams, st)
			break
		}
		if code != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("after closing a stream: %d %s", code, b)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Streams are not cut by the read deadline: wait well past it, then
	// end the run; every open stream gets done.
	time.Sleep(3 * readTimeout)
	close(release)
	released = true
	if err := <-indexed; err != nil {
		t.Fatalf("index: %v", err)
	}
	for i, st := range streams {
		gotDone := false
		for ev := range st.events {
			if ev.name == "done" {
				gotDone = true
			}
		}
		if !gotDone {
			t.Errorf("stream %d ended without done", i)
		}
	}
	// Every place is free again: with no run going, each subscription is
	// answered with done at once.
	for i := range limit + 1 {
		resp, err := e.client.Do(e.req(t, "GET", "/api/workspaces/default/progress", nil))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), "event: done") {
			t.Errorf("subscription %d after the run: %d %q", i, resp.StatusCode, b)
		}
	}
}
