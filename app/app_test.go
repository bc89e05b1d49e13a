package app_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lore/app"
	"lore/engine/synth"
	"lore/index/parse"
	"lore/store"
)

// The test binary doubles as the parse worker; models run in the
// lore-runner-<variant> programs that `make test` builds (LORE_RUNNER_DIR).
func TestMain(m *testing.M) {
	parse.MaybeServeWorker(os.Args) // a parse worker child process serves and exits here
	os.Exit(m.Run())
}

var (
	once     sync.Once
	fixtures string
	fixErr   error
)

// models writes tiny chat, embedding and rerank models and a small library.
func setup(t *testing.T) (dir string) {
	t.Helper()
	once.Do(func() {
		fixtures, fixErr = os.MkdirTemp("", "lore-app-test")
		if fixErr != nil {
			return
		}
		for name, opt := range map[string]synth.Options{
			"chat.gguf":   {Shape: "tiny", Seed: 1},
			"fast.gguf":   {Shape: "tiny", Seed: 4},
			"embed.gguf":  {Shape: "tiny", Embedding: true, Seed: 2},
			"rerank.gguf": {Shape: "tiny", Reranker: true, Seed: 3},
		} {
			if fixErr = synth.Write(filepath.Join(fixtures, name), opt); fixErr != nil {
				return
			}
		}
		lib := filepath.Join(fixtures, "library")
		os.MkdirAll(lib, 0o755)
		for name, text := range library {
			if fixErr = os.WriteFile(filepath.Join(lib, name), []byte(text), 0o644); fixErr != nil {
				return
			}
		}
	})
	if fixErr != nil {
		t.Fatal(fixErr)
	}
	return fixtures
}

var library = map[string]string{
	"river.md":   "# The river\n\nThe river market opens at dawn. Boats bring fish and grain from the north.\n",
	"energy.md":  "# Energy report\n\nThe students wrote a report about solar energy and wind power in the valley.\n",
	"garden.txt": "The small garden behind the library grows tomatoes, beans and a single apple tree.\n",
	"music.md":   "# Music\n\nThe city orchestra plays a summer concert in the park every year.\n",
}

type opts struct {
	chat, embed, rerank, fast bool
	data                      string // the data folder (default: a new one)
}

func newApp(t *testing.T, o opts) *app.App {
	t.Helper()
	dir := setup(t)
	cfg := app.Config{DataDir: cmp.Or(o.data, t.TempDir()), Warm: true,
		WorkerCmd: []string{os.Args[0], "parse-worker"}}
	if o.chat {
		cfg.ChatModel = filepath.Join(dir, "chat.gguf")
	}
	if o.embed {
		cfg.EmbedModel = filepath.Join(dir, "embed.gguf")
	}
	if o.rerank {
		cfg.RerankModel = filepath.Join(dir, "rerank.gguf")
	}
	if o.fast {
		cfg.FastChatModel = filepath.Join(dir, "fast.gguf")
	}
	a, err := app.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	s := a.Settings()
	s.MaxTokens = 16
	if err := a.SaveSettings(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	sum, err := a.Index(context.Background(), "default", []string{filepath.Join(dir, "library")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Indexed != len(library) {
		t.Fatalf("indexed %d of %d files: %+v", sum.Indexed, len(library), sum)
	}
	if err := a.WaitWarm(context.Background()); err != nil {
		t.Fatal(err)
	}
	return a
}

type recorded struct {
	events  []string
	answer  strings.Builder
	sources app.Sources
	trace   *app.Trace
}

func ask(t *testing.T, a *app.App, q string, chat int64) *recorded {
	t.Helper()
	r := &recorded{}
	tr, err := a.Ask(context.Background(), app.AskRequest{Question: q, ChatID: chat}, func(ev app.Event) error {
		r.events = append(r.events, ev.Kind())
		switch ev := ev.(type) {
		case app.Token:
			r.answer.WriteString(ev.Text)
		case app.Sources:
			r.sources = ev
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r.trace = tr
	return r
}

func TestFallbackLevels(t *testing.T) {
	tests := []struct {
		name   string
		o      opts
		level  app.Fallback
		reason string
		mode   string
	}{
		{"full pipeline", opts{chat: true, embed: true, rerank: true}, app.FallbackNone, "", "hybrid"},
		{"no reranker", opts{chat: true, embed: true}, app.FallbackRerank, "no rerank model", "hybrid"},
		{"no embedding model", opts{chat: true}, app.FallbackBM25, "BM25 only", "bm25"},
		{"no generation model", opts{embed: true, rerank: true}, app.FallbackExtractive, "extractive", "hybrid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newApp(t, tt.o)
			r := ask(t, a, "when does the river market open", 0)
			tr := r.trace
			if tr.FallbackLevel != tt.level || !strings.Contains(tr.FallbackReason, tt.reason) {
				t.Errorf("fallback %d %q, want %d containing %q", tr.FallbackLevel, tr.FallbackReason, tt.level, tt.reason)
			}
			if tr.RetrievalMode != tt.mode {
				t.Errorf("retrieval mode %q, want %q", tr.RetrievalMode, tt.mode)
			}
			if r.answer.Len() == 0 {
				t.Error("no answer")
			}
			if tt.level == 3 && !strings.Contains(r.answer.String(), "Extractive answer") {
				t.Errorf("extractive answer not labelled: %q", r.answer.String())
			}
			if tt.level == 3 && !strings.Contains(r.answer.String(), "river market") {
				t.Errorf("extractive answer misses the passage: %q", r.answer.String())
			}
			checkTrace(t, r)
		})
	}
}

// checkTrace asserts the trace is complete and consistent with the events.
func checkTrace(t *testing.T, r *recorded) {
	t.Helper()
	tr := r.trace
	always := []string{app.StageEmbed, app.StageVector, app.StageBM25, app.StageRetrieval, app.StageRerank, app.StageAssemble, app.StageTTFT, app.StageTotal}
	// A skipped stage keeps its row: 0, with the reason.
	if why := tr.Skipped[app.StageRerank]; strings.Contains(tr.FallbackReason, "rerank skipped") != (why != "") ||
		why != "" && tr.Stages[app.StageRerank] != 0 {
		t.Errorf("rerank %v ms, skipped %q, fallback %q: a skipped rerank is 0 ms with its reason", tr.Stages[app.StageRerank], why, tr.FallbackReason)
	}
	for _, s := range always {
		v, ok := tr.Stages[s]
		if !ok || v < 0 {
			t.Errorf("stage %s = %v (present %v)", s, v, ok)
		}
		if tr.StageStarts[s] < 0 {
			t.Errorf("stage %s starts at %v", s, tr.StageStarts[s])
		}
	}
	if tr.Route != "extractive" {
		for _, s := range []string{app.StageQueue, app.StagePrefill, app.StageLLMTTFT, app.StageTokenize, app.StageDecode} {
			if v, ok := tr.Stages[s]; !ok || v < 0 {
				t.Errorf("stage %s = %v (present %v)", s, v, ok)
			}
		}
		if tr.Stages[app.StageTTFT] < tr.Stages[app.StageLLMTTFT] {
			t.Errorf("ttft %v < llm_ttft %v", tr.Stages[app.StageTTFT], tr.Stages[app.StageLLMTTFT])
		}
		if tr.PromptTokens == 0 || tr.CachedTokens+tr.EvalTokens != tr.PromptTokens {
			t.Errorf("prompt tokens %d cached %d eval %d", tr.PromptTokens, tr.CachedTokens, tr.EvalTokens)
		}
	}
	if tr.Stages[app.StageTotal] < tr.Stages[app.StageTTFT] {
		t.Errorf("total %v < ttft %v", tr.Stages[app.StageTotal], tr.Stages[app.StageTTFT])
	}
	checkSupport(t, r)
	// The stages before generation fit inside TTFT.
	pre := tr.Stages[app.StageQueue] + tr.Stages[app.StageRetrieval] + tr.Stages[app.StageRerank] + tr.Stages[app.StageAssemble]
	if pre > tr.Stages[app.StageTTFT]+0.01 {
		t.Errorf("queue+retrieval+rerank+assemble %v exceed ttft %v", pre, tr.Stages[app.StageTTFT])
	}
	if tr.FirstTokenAt.IsZero() || tr.RequestID == "" || tr.VersionID == "" || tr.WorkspaceID == 0 {
		t.Errorf("trace fields missing: %+v", tr)
	}
	// Order: trace first, sources before the first token, done last.
	order := strings.Join(r.events, ",")
	si, ti := strings.Index(order, "sources"), strings.Index(order, "token")
	if !strings.HasPrefix(order, "trace,") || si < 0 || ti < 0 || si > ti || !strings.HasSuffix(order, ",done") {
		t.Errorf("event order %s", order)
	}
}

// checkSupport asserts the trace scores the answer it streamed against the
// sources it sent (which sentences are checked, and which cite nothing,
// depends on the answer alone), and that an extractive answer has no score.
func checkSupport(t *testing.T, r *recorded) {
	t.Helper()
	tr := r.trace
	if tr.Route == "extractive" {
		if tr.Support != nil || tr.CheckedSentences != 0 {
			t.Errorf("extractive answer scored: support set %v, %d sentences", tr.Support != nil, tr.CheckedSentences)
		}
		return
	}
	texts := make([]string, len(r.sources))
	for i, s := range r.sources {
		texts[i] = s.Text
	}
	want := app.CheckSupport(r.answer.String(), texts)
	t.Logf("support: %d of %d checked sentences (%d uncited)", tr.SupportedSentences, tr.CheckedSentences, tr.UncitedSentences)
	if (tr.Support != nil) != (want.Score != nil) || tr.CheckedSentences != want.Sentences || tr.UncitedSentences != want.Uncited {
		t.Errorf("support set %v, %d sentences (%d uncited); the streamed answer has %d checkable (%d uncited): %q",
			tr.Support != nil, tr.CheckedSentences, tr.UncitedSentences, want.Sentences, want.Uncited, r.answer.String())
	}
	if tr.Support != nil && (tr.SupportedSentences > tr.CheckedSentences ||
		math.Abs(*tr.Support-float64(tr.SupportedSentences)/float64(tr.CheckedSentences)) > 0.001) {
		t.Errorf("support %v, %d of %d sentences", *tr.Support, tr.SupportedSentences, tr.CheckedSentences)
	}
}

func TestMultiTurnReusesCache(t *testing.T) {
	a := newApp(t, opts{chat: true, embed: true})
	first := ask(t, a, "when does the river market open", 0)
	prefixTokens := first.trace.CachedTokens
	if prefixTokens < 20 {
		t.Fatalf("first question reused only %d tokens: the system prefix was not warm", prefixTokens)
	}
	second := ask(t, a, "and what do the boats bring", first.trace.ChatID)
	if second.trace.ChatID != first.trace.ChatID {
		t.Fatalf("second turn went to chat %d, not %d", second.trace.ChatID, first.trace.ChatID)
	}
	if second.trace.CachedTokens < first.trace.PromptTokens {
		t.Errorf("the follow-up reused %d tokens, fewer than the whole first prompt (%d): the earlier turn was not repeated as sent",
			second.trace.CachedTokens, first.trace.PromptTokens)
	}
	chat, err := a.Chat(context.Background(), first.trace.ChatID)
	if err != nil {
		t.Fatal(err)
	}
	if len(chat.Messages) != 4 {
		t.Errorf("chat has %d messages, want 4 (two questions, two answers)", len(chat.Messages))
	}
	stored, err := a.Trace(context.Background(), second.trace.RequestID)
	if err != nil || stored.CachedTokens != second.trace.CachedTokens {
		t.Errorf("stored trace %+v, %v", stored, err)
	}
}

// TestAskedAgainRestoresKeptState: a question asked again in a new chat,
// after another question has used the answer sequence, restores the state
// the runner kept after its first answer: it reads one token, not its
// passages, and answers word for word as before; the trace says so.
func TestAskedAgainRestoresKeptState(t *testing.T) {
	a := newApp(t, opts{chat: true, embed: true})
	s := a.Settings()
	s.TopK = 1 // one passage: each question its own
	if err := a.SaveSettings(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	q := "when does the river market open"
	first := ask(t, a, q, 0)
	if first.trace.Restored != 0 {
		t.Fatalf("the first question restored %d tokens", first.trace.Restored)
	}
	other := ask(t, a, "when does the city orchestra play its summer concert", 0)
	if len(first.sources) != 1 || len(other.sources) != 1 || first.sources[0].ChunkID == other.sources[0].ChunkID {
		t.Fatalf("sources %+v and %+v: want one each, not the same (else the answer sequence would still hold the first prompt's)",
			first.sources, other.sources)
	}
	again := ask(t, a, q, 0)
	tr := again.trace
	if tr.Restored < first.trace.PromptTokens-1 || tr.EvalTokens > 1 || tr.RestoreNote != "" {
		t.Errorf("asked again: %d restored of a %d-token prompt, %d evaluated, note %q", tr.Restored, tr.PromptTokens, tr.EvalTokens, tr.RestoreNote)
	}
	if _, ok := tr.Stages[app.StageRestore]; !ok {
		t.Errorf("no %s stage in the trace: %v", app.StageRestore, tr.Stages)
	}
	if again.answer.String() != first.answer.String() {
		t.Errorf("asked again %q, the first time %q", again.answer.String(), first.answer.String())
	}
}

func TestNewRefusesModelItCannotOpen(t *testing.T) {
	// A model named for this run must open: a missing or invalid file is a
	// clear error naming the role, never a crash (closing what was opened
	// before it once panicked on the unset retriever).
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.gguf")
	if err := os.WriteFile(bad, []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  app.Config
		want string
	}{
		{"missing chat", app.Config{ChatModel: filepath.Join(dir, "none.gguf")}, "chat model"},
		{"missing embedding", app.Config{EmbedModel: filepath.Join(dir, "none.gguf")}, "embedding model"},
		{"invalid embedding", app.Config{EmbedModel: bad}, "embedding model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.DataDir = t.TempDir()
			a, err := app.New(context.Background(), tc.cfg)
			if err == nil {
				a.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name the %s", err, tc.want)
			}
		})
	}
}

func TestEmbeddingModelGone(t *testing.T) {
	// A real fault: the embedding model file disappears after start, so the
	// runner cannot load it and the vector step fails. Retrieval falls back.
	dir := t.TempDir()
	emb := filepath.Join(dir, "embed.gguf")
	if err := synth.Write(emb, synth.Options{Shape: "tiny", Embedding: true, Seed: 2}); err != nil {
		t.Fatal(err)
	}
	src := setup(t)
	a, err := app.New(context.Background(), app.Config{DataDir: t.TempDir(), ChatModel: filepath.Join(src, "chat.gguf"),
		EmbedModel: emb, WorkerCmd: []string{os.Args[0], "parse-worker"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Index(context.Background(), "default", []string{filepath.Join(src, "library")}, nil); err != nil {
		t.Fatal(err)
	}
	a.Close() // stop the runners, then lose the file
	a, err = app.New(context.Background(), app.Config{DataDir: a.DataDir(), ChatModel: filepath.Join(src, "chat.gguf"),
		EmbedModel: emb, WorkerCmd: []string{os.Args[0], "parse-worker"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	os.Remove(emb)
	r := ask(t, a, "what grows in the garden", 0)
	if r.trace.FallbackLevel != 2 || r.trace.RetrievalMode != "bm25" {
		t.Errorf("fallback %d mode %s (%s), want level 2 bm25", r.trace.FallbackLevel, r.trace.RetrievalMode, r.trace.FallbackReason)
	}
	if r.answer.Len() == 0 {
		t.Error("no answer")
	}
}

func TestRerankBudget(t *testing.T) {
	a := newApp(t, opts{chat: true, embed: true, rerank: true})
	ask(t, a, "when does the river market open", 0) // measures rerank cost
	s := a.Settings()
	s.RerankBudgetMs = 1
	s.RerankK = 20
	if err := a.SaveSettings(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	r := ask(t, a, "what grows in the garden", 0)
	if r.trace.FallbackLevel != 1 || !strings.Contains(r.trace.FallbackReason, "budget") {
		t.Errorf("fallback %d %q, want level 1 over budget", r.trace.FallbackLevel, r.trace.FallbackReason)
	}
}

func TestSourcePathConfined(t *testing.T) {
	a := newApp(t, opts{embed: true})
	ctx := context.Background()
	res, err := a.Search(ctx, "default", "river market", searchOpts)
	if err != nil || len(res.Passages) == 0 {
		t.Fatalf("search: %v %v", res, err)
	}
	path, err := a.SourcePath(ctx, res.Passages[0].ChunkID)
	if err != nil || !strings.HasSuffix(path, ".md") && !strings.HasSuffix(path, ".txt") {
		t.Fatalf("source path %q: %v", path, err)
	}
	// After the folder is removed, its chunks are gone and nothing opens.
	if err := a.RemoveFolder(ctx, "default", filepath.Join(setup(t), "library")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SourcePath(ctx, res.Passages[0].ChunkID); err == nil {
		t.Error("a removed folder's file still opens")
	}
	if _, err := a.SourcePath(ctx, 1<<40); err == nil {
		t.Error("unknown chunk opened")
	}

	// Escape attempts. A folder of the workspace, files outside it (one in
	// a sibling whose name starts like the folder's), and documents whose
	// stored paths or files on disk point out of it.
	root := t.TempDir()
	lib, outside, sibling := filepath.Join(root, "lib"), filepath.Join(root, "outside"), filepath.Join(root, "lib2")
	write := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"a.md", "b.md", "c.md", "sub/d.md", "deep/e.md"} {
		write(filepath.Join(lib, f), "# Inside\n\nThe lighthouse keeper's notes on "+f+".\n")
	}
	write(filepath.Join(outside, "secret.txt"), "the secret outside the library\n")
	write(filepath.Join(outside, "d.md"), "# Outside\n\nThe secret that replaced sub/d.md.\n")
	write(filepath.Join(sibling, "secret.txt"), "the sibling's secret\n")
	if err := os.Symlink(filepath.Join(lib, "c.md"), filepath.Join(lib, "link-in.md")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Index(ctx, "confine", []string{lib}, nil); err != nil {
		t.Fatal(err)
	}

	// Documents the indexer never writes, planted in the store as a
	// tampered or stale database would hold them.
	db, err := store.Open(ctx, filepath.Join(a.DataDir(), "lore.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ws store.Workspace
	wss, _ := db.Workspaces(ctx)
	for _, w := range wss {
		if w.Name == "confine" {
			ws = w
		}
	}
	folders, err := db.Folders(ctx, ws.ID)
	if err != nil || len(folders) != 1 {
		t.Fatalf("folders of confine: %v %v", folders, err)
	}
	chunkOf := func(path string) int64 {
		t.Helper()
		d, err := db.DocumentByPath(ctx, ws.ID, path)
		if err != nil {
			t.Fatalf("document %s: %v", path, err)
		}
		cs, err := db.Chunks(ctx, d.ID)
		if err != nil || len(cs) == 0 {
			t.Fatalf("chunks of %s: %v %v", path, cs, err)
		}
		return cs[0].ID
	}
	plant := func(path string) int64 {
		t.Helper()
		d := store.Document{WorkspaceID: ws.ID, FolderID: folders[0].ID, Path: path, Rel: filepath.Base(path), Parser: "text"}
		if err := db.ReplaceDocument(ctx, d, []store.Chunk{{Text: "planted " + path, Tokens: 3}}); err != nil {
			t.Fatal(err)
		}
		return chunkOf(path)
	}
	planted := map[string]int64{}
	for _, p := range []string{
		filepath.Join(lib, "..", "outside", "secret.txt"), // ".." out of the folder
		lib + "/../outside/secret.txt",                    // the same, uncleaned
		filepath.Join(outside, "secret.txt"),              // an absolute path elsewhere
		filepath.Join(sibling, "secret.txt"),              // a sibling sharing the folder's prefix
		filepath.Join(lib, "link-in.md"),                  // a link to a file inside: allowed
		filepath.Join(lib, "deep", "..", "b.md"),          // ".." that stays inside: allowed
	} {
		planted[p] = plant(p)
	}
	indexed := map[string]int64{}
	for _, f := range []string{"a.md", "b.md", "sub/d.md"} {
		indexed[f] = chunkOf(filepath.Join(lib, f))
	}
	// After indexing: a file becomes a link out, a folder becomes a link
	// out (with a file of the same name behind it).
	if err := os.Remove(filepath.Join(lib, "a.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(lib, "a.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(lib, "sub")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(lib, "sub")); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name  string
		chunk int64
		ok    bool
		want  string // the path it opens, when ok
	}{
		{"an ordinary file", indexed["b.md"], true, filepath.Join(lib, "b.md")},
		{"a link to a file inside", planted[filepath.Join(lib, "link-in.md")], true, filepath.Join(lib, "c.md")},
		{".. that stays inside", planted[filepath.Join(lib, "deep", "..", "b.md")], true, filepath.Join(lib, "b.md")},
		{".. out of the folder", planted[filepath.Join(lib, "..", "outside", "secret.txt")], false, ""},
		{".. out, uncleaned", planted[lib+"/../outside/secret.txt"], false, ""},
		{"an absolute path elsewhere", planted[filepath.Join(outside, "secret.txt")], false, ""},
		{"a sibling folder with the same prefix", planted[filepath.Join(sibling, "secret.txt")], false, ""},
		{"a file replaced by a link out", indexed["a.md"], false, ""},
		{"a folder replaced by a link out", indexed["sub/d.md"], false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := a.SourcePath(ctx, c.chunk)
			if !c.ok {
				if !errors.Is(err, app.ErrOutsideLibrary) {
					t.Fatalf("SourcePath = %q, %v; want ErrOutsideLibrary", got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("SourcePath: %v", err)
			}
			if want, _ := filepath.EvalSymlinks(c.want); got != want {
				t.Errorf("SourcePath = %q, want %q", got, want)
			}
		})
	}

	// The folder itself reached through a link is still the folder: its
	// files open, the ones outside it still do not.
	linkRoot := filepath.Join(root, "lib-link")
	if err := os.Symlink(lib, linkRoot); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Index(ctx, "via-link", []string{linkRoot}, nil); err != nil {
		t.Fatal(err)
	}
	wss, _ = db.Workspaces(ctx)
	for _, w := range wss {
		if w.Name == "via-link" {
			ws = w
		}
	}
	if got, err := a.SourcePath(ctx, chunkOf(filepath.Join(linkRoot, "b.md"))); err != nil || !strings.HasSuffix(got, filepath.Join("lib", "b.md")) {
		t.Errorf("a file of a folder added through a link: %q, %v", got, err)
	}
	if folders, err = db.Folders(ctx, ws.ID); err != nil || len(folders) != 1 {
		t.Fatalf("folders of via-link: %v %v", folders, err)
	}
	if got, err := a.SourcePath(ctx, plant(filepath.Join(linkRoot, "..", "outside", "secret.txt"))); !errors.Is(err, app.ErrOutsideLibrary) {
		t.Errorf("out of a folder added through a link: %q, %v", got, err)
	}
}

var searchOpts = app.SearchOptions{TopK: 4}

func TestSwitchModels(t *testing.T) {
	a := newApp(t, opts{chat: true})
	if r := ask(t, a, "when does the river market open", 0); r.trace.FallbackLevel != 2 {
		t.Fatalf("without an embedding model: level %d, want 2", r.trace.FallbackLevel)
	}
	// Models are chosen from those Lore finds: put one in the data folder.
	models := filepath.Join(a.DataDir(), "models")
	os.MkdirAll(models, 0o755)
	emb := filepath.Join(models, "embed.gguf")
	if err := os.Symlink(filepath.Join(setup(t), "embed.gguf"), emb); err != nil {
		t.Fatal(err)
	}
	s := a.Settings()
	s.EmbedModel = filepath.Join(t.TempDir(), "elsewhere.gguf")
	if err := a.SaveSettings(context.Background(), s); err == nil {
		t.Fatal("a model path Lore did not find was accepted")
	}
	s.EmbedModel = emb
	if err := a.SaveSettings(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Index(context.Background(), "default", nil, nil); err != nil { // embeds the existing chunks
		t.Fatal(err)
	}
	r := ask(t, a, "when does the river market open", 0)
	if r.trace.FallbackLevel != 1 || r.trace.RetrievalMode != "hybrid" {
		t.Errorf("after adding an embedding model: level %d mode %s (%s)", r.trace.FallbackLevel, r.trace.RetrievalMode, r.trace.FallbackReason)
	}
	if r.trace.CachedTokens < 20 {
		t.Errorf("the unchanged chat model lost its warm prefix: %d cached tokens", r.trace.CachedTokens)
	}
	s.ChatModel = ""
	if err := a.SaveSettings(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if r := ask(t, a, "when does the river market open", 0); r.trace.FallbackLevel != 3 || r.trace.Route != "extractive" {
		t.Errorf("without a chat model: level %d route %s", r.trace.FallbackLevel, r.trace.Route)
	}
}

func TestWatchKeepsWorkspaceCurrent(t *testing.T) {
	lib := t.TempDir()
	os.WriteFile(filepath.Join(lib, "first.md"), []byte("# First\n\nThe lighthouse keeper logs the weather.\n"), 0o644)
	a, err := app.New(context.Background(), app.Config{DataDir: t.TempDir(), Watch: true,
		WorkerCmd: []string{os.Args[0], "parse-worker"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.AddFolder(context.Background(), "default", lib); err != nil {
		t.Fatal(err)
	}
	// What the job runner did, for the failure message.
	events, _, stop, err := a.Subscribe(context.Background(), "default")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var (
		mu  sync.Mutex
		log []string
	)
	go func() {
		for ev := range events {
			b, _ := json.Marshal(ev.Payload())
			mu.Lock()
			log = append(log, time.Now().Format("15:04:05.000 ")+ev.Kind()+" "+string(b))
			mu.Unlock()
		}
	}()
	found := func(q string) bool {
		res, err := a.Search(context.Background(), "default", q, searchOpts)
		return err == nil && len(res.Passages) > 0
	}
	// A bound only against hanging: under a loaded CI machine a run can
	// take seconds.
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if cond() {
				return
			}
		}
		st, _ := a.IndexStatus(context.Background(), "default")
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("timed out waiting for %s; index state %+v; events:\n%s", what, st, strings.Join(log, "\n"))
	}
	waitFor("the folder to be indexed", func() bool { return found("lighthouse") })
	os.WriteFile(filepath.Join(lib, "second.md"), []byte("# Second\n\nThe ferry timetable changes in winter.\n"), 0o644)
	waitFor("the watcher to index a new file", func() bool { return found("ferry timetable") })
	os.Remove(filepath.Join(lib, "first.md"))
	waitFor("the watcher to drop a deleted file", func() bool { return !found("lighthouse") })
}

// TestRetrievalOverlapsDecode: a second question is retrieved and
// assembled while the first is still being generated (and read by a slow
// client); only the model itself is taken one question at a time.
func TestRetrievalOverlapsDecode(t *testing.T) {
	a := newApp(t, opts{chat: true, embed: true})
	ctx := context.Background()
	s := a.Settings()
	s.MaxTokens = 64 // the tiny model decodes to the limit
	if err := a.SaveSettings(ctx, s); err != nil {
		t.Fatal(err)
	}
	first := make(chan struct{})
	var once sync.Once
	type result struct {
		tr  *app.Trace
		err error
	}
	done := make(chan result, 1)
	go func() {
		tr, err := a.Ask(ctx, app.AskRequest{Question: "when does the river market open"}, func(ev app.Event) error {
			if _, ok := ev.(app.Token); ok {
				once.Do(func() { close(first) })
				time.Sleep(10 * time.Millisecond) // a slow client
			}
			return nil
		})
		done <- result{tr, err}
	}()
	<-first
	second := ask(t, a, "what grows in the small garden", 0).trace
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	at := func(tr *app.Trace, stage string, end bool) time.Time {
		off := tr.StageStarts[stage]
		if end {
			off += tr.Stages[stage]
		}
		return tr.Received.Add(time.Duration(off * float64(time.Millisecond)))
	}
	firstEnd := at(r.tr, app.StageTotal, true)
	retrieved := at(second, app.StageRetrieval, true)
	if !retrieved.Before(firstEnd) {
		t.Errorf("question 2 was retrieved %v after question 1's last token: retrieval waited for the other answer",
			retrieved.Sub(firstEnd))
	}
	if second.Stages[app.StageQueue] <= 0 {
		t.Errorf("question 2 waited %v ms for the model, which was still answering question 1", second.Stages[app.StageQueue])
	}
	t.Logf("question 2 retrieved %v before question 1 ended; it then waited %.0f ms for the model",
		firstEnd.Sub(retrieved), second.Stages[app.StageQueue])
}

// TestPrefetchAdopted: a draft's prompt read while typing is adopted by the
// question, which then evaluates little more than itself and answers as a
// cold run does; a question with other passages misses and says why.
func TestPrefetchAdopted(t *testing.T) {
	ctx := context.Background()
	const q = "when does the river market open"
	cold := ask(t, newApp(t, opts{chat: true, embed: true}), q, 0)

	a := newApp(t, opts{chat: true, embed: true})
	watched, stop := a.WatchPrefetch(ctx)
	defer stop()
	if st := nextStatus(t, watched); st.State != app.ReadAheadNone {
		t.Errorf("first status pushed: %+v, want none", st)
	}
	res, err := a.Prefetch(ctx, app.PrefetchRequest{Draft: q, ClientID: "test-client"})
	if err != nil || !res.Started || res.Passages == 0 {
		t.Fatalf("Prefetch: %+v %v", res, err)
	}
	if st := a.PrefetchStatus(); st.State != app.ReadAheadReading && st.State != app.ReadAheadReady || st.Passages != res.Passages {
		t.Errorf("status after the draft: %+v, want it reading %d passages", st, res.Passages)
	}
	// Pushed as it reads: never fewer passages read than before, until ready.
	var st app.PrefetchStatus
	for read := 0; st.State != app.ReadAheadReady; read = st.Read {
		if st = nextStatus(t, watched); st.Passages != res.Passages || st.Read < read || st.State == app.ReadAheadStopped {
			t.Fatalf("status pushed while reading: %+v (read %d before)", st, read)
		}
	}
	if st.Read != st.Passages || st.ReadTokens != st.Tokens || st.Tokens == 0 || st != a.PrefetchStatus() {
		t.Errorf("status once read: %+v (asked: %+v)", st, a.PrefetchStatus())
	}
	again, err := a.Prefetch(ctx, app.PrefetchRequest{Draft: q, ClientID: "other-client"})
	if err != nil || again.Started || again.Reason != "same passages" {
		t.Errorf("second prefetch of the same passages: %+v %v", again, err)
	}
	warm := ask(t, a, q, 0)
	tr := warm.trace
	if st := a.PrefetchStatus(); st.State != app.ReadAheadNone {
		t.Errorf("status after the question adopted the drafts: %+v, want none", st)
	}
	if st := nextStatus(t, watched); st.State != app.ReadAheadNone {
		t.Errorf("status pushed after the question adopted the drafts: %+v, want none", st)
	}
	if tr.Prefetch != app.PrefetchHit || tr.PrefetchedTokens == 0 {
		t.Fatalf("prefetch %q (%s), %d tokens prefetched", tr.Prefetch, tr.PrefetchMiss, tr.PrefetchedTokens)
	}
	if tr.EvalTokens > cold.trace.EvalTokens-tr.PrefetchedTokens+1 || tr.EvalTokens > 40 {
		t.Errorf("evaluated %d tokens after adopting %d (cold run: %d)", tr.EvalTokens, tr.PrefetchedTokens, cold.trace.EvalTokens)
	}
	// (Greedy output equal to a cold run's is asserted in engine, with the
	// same batch split: random weights make near-ties that a different
	// split of the same prompt can tip.)
	t.Logf("cold: %d of %d tokens evaluated; adopted: %d prefetched, %d evaluated", cold.trace.EvalTokens,
		cold.trace.PromptTokens, tr.PrefetchedTokens, tr.EvalTokens)

	// Other passages: a miss, with its reason. BM25 only, so that no
	// passage of the draft is among the question's candidates (a random
	// embedder ranks every passage somewhere, and a candidate the
	// speculative sequence holds keeps its place).
	a = newApp(t, opts{chat: true})
	if _, err := a.Prefetch(ctx, app.PrefetchRequest{Draft: "tomatoes beans apple tree garden", ClientID: "client-b"}); err != nil {
		t.Fatal(err)
	}
	// The rate limit, on calls that return at once (a draft too short to retrieve for).
	if res, err := a.Prefetch(ctx, app.PrefetchRequest{Draft: "tomatoes beans", ClientID: "client-c"}); err != nil || res.Started {
		t.Fatalf("short draft: %+v %v", res, err)
	}
	if _, err := a.Prefetch(ctx, app.PrefetchRequest{Draft: "tomatoes beans apple", ClientID: "client-c"}); !errors.Is(err, app.ErrBusy) {
		t.Errorf("prefetch right after the last: %v, want rate-limited", err)
	}
	other := ask(t, a, "the city orchestra summer concert", 0).trace
	if other.Prefetch != app.PrefetchMiss || other.PrefetchMiss != app.MissPassages {
		t.Errorf("question with other passages: prefetch %q (%q)", other.Prefetch, other.PrefetchMiss)
	}
	if _, err := a.Prefetch(ctx, app.PrefetchRequest{Draft: q, Workspace: "nope"}); !errors.Is(err, app.ErrNotFound) {
		t.Errorf("prefetch over an unknown workspace: %v", err)
	}
}

// nextStatus is the next read-ahead status pushed.
func nextStatus(t *testing.T, watched <-chan app.PrefetchStatus) app.PrefetchStatus {
	t.Helper()
	select {
	case st := <-watched:
		return st
	case <-time.After(time.Minute):
		t.Fatal("no read-ahead status pushed within a minute")
		return app.PrefetchStatus{}
	}
}

// waitReadAhead waits until the latest draft is read, and says what it read.
func waitReadAhead(t *testing.T, a *app.App) app.PrefetchStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	watched, stop := a.WatchPrefetch(ctx)
	defer stop()
	for {
		select {
		case st := <-watched:
			if st.State != app.ReadAheadReading {
				return st
			}
		case <-ctx.Done():
			t.Fatal("prefetch never finished")
		}
	}
}

// TestPrefetchExtends: a question that adds a passage to its draft's keeps
// the draft's passages first, adopts what the draft read and reads only the
// new passage (a partial hit); with a first-token budget too small for that
// passage, it is left out and said so, while a passage already read stays.
func TestPrefetchExtends(t *testing.T) {
	ctx := context.Background()
	// BM25 only: the passages each question gets are known.
	fresh := func(budgetMs int) *app.App {
		a := newApp(t, opts{chat: true})
		ask(t, a, "what grows in the small garden", 0) // measures the model's reading speed
		s := a.Settings()
		s.RouteTTFTMs = budgetMs
		if err := a.SaveSettings(ctx, s); err != nil {
			t.Fatal(err)
		}
		return a
	}
	waitDraft := func(a *app.App, draft string) {
		t.Helper()
		if res, err := a.Prefetch(ctx, app.PrefetchRequest{Draft: draft, ClientID: draft}); err != nil || !res.Started {
			t.Fatalf("Prefetch(%q): %+v %v", draft, res, err)
		}
		waitReadAhead(t, a)
	}
	const q = "when does the river market open for boats with fish and grain, and the orchestra"
	sources := func(a *app.App, r *recorded) []string {
		var docs []string
		for _, id := range r.trace.TurnPassages {
			src, err := a.Chunk(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, src.Document)
		}
		return docs
	}

	// A budget every passage fits in, however loaded the machine: what
	// the drafts did not read is read after Enter, none left out.
	a := fresh(600_000)
	waitDraft(a, "when does the river market open")
	r := ask(t, a, q, 0)
	tr := r.trace
	if tr.Prefetch != app.PrefetchPartial || tr.PrefetchNewPassages != 1 || tr.PrefetchedTokens == 0 || tr.LatePassages != 0 {
		t.Fatalf("prefetch %q (%s): %d new passages, %d tokens prefetched, %d late; want a partial hit with 1 new passage",
			tr.Prefetch, tr.PrefetchMiss, tr.PrefetchNewPassages, tr.PrefetchedTokens, tr.LatePassages)
	}
	if docs := sources(a, r); len(docs) != 2 || docs[0] != "river.md" || docs[1] != "music.md" {
		t.Errorf("prompt passages %v: want the draft's river.md first, then music.md", docs)
	}
	if tr.EvalTokens+tr.PrefetchedTokens > tr.PromptTokens {
		t.Errorf("evaluated %d of %d tokens after adopting %d: read twice", tr.EvalTokens, tr.PromptTokens, tr.PrefetchedTokens)
	}

	// A budget no passage fits in: the draft's passage (read) stays, the
	// new one is left out and counted late.
	a = fresh(1)
	waitDraft(a, "when does the river market open")
	r = ask(t, a, q, 0)
	if r.trace.LatePassages != 1 {
		t.Errorf("%d late passages, want 1 (prefetch %q)", r.trace.LatePassages, r.trace.Prefetch)
	}
	if docs := sources(a, r); len(docs) != 1 || docs[0] != "river.md" {
		t.Errorf("prompt passages %v: want only the draft's river.md", docs)
	}
}

// TestCutPassageFollowUp: a typed question whose best passage alone
// misses the first-token budget reads it cut (the part with the question's
// words) and says so; a follow-up renders that turn cut the same way, so it
// reuses the whole previous prompt.
func TestCutPassageFollowUp(t *testing.T) {
	ctx := context.Background()
	a := newApp(t, opts{chat: true})
	dir := t.TempDir()
	var long strings.Builder
	for i := range 30 {
		fmt.Fprintf(&long, "Entry %d of the keeper's log: the weather held and the ships passed far out. ", i)
	}
	long.WriteString("Each night the lighthouse keeper trims the wick and lights the lamp at dusk.")
	for name, text := range map[string]string{
		"lighthouse.md": long.String(),
		"harbour.md":    "The harbour office opens at nine and closes at five.",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Index(ctx, "log", []string{dir}, nil); err != nil {
		t.Fatal(err)
	}
	s := a.Settings()
	s.RouteTTFTMs = 1 // no passage fits
	if err := a.SaveSettings(ctx, s); err != nil {
		t.Fatal(err)
	}
	askIn := func(q string, chat int64) *app.Trace {
		t.Helper()
		tr, err := a.Ask(ctx, app.AskRequest{Workspace: "log", Question: q, ChatID: chat}, func(app.Event) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	if res, err := a.Prefetch(ctx, app.PrefetchRequest{Workspace: "log", Draft: "when does the harbour office open", ClientID: "t"}); err != nil || !res.Started {
		t.Fatalf("Prefetch: %+v %v", res, err)
	}
	waitReadAhead(t, a)
	first := askIn("what does the lighthouse keeper do with the lamp at dusk", 0)
	c := first.Cut
	if c == nil || c.Tokens <= 0 || c.From == 0 {
		t.Fatalf("cut %+v: want the lighthouse log cut to its end, where the question's words are", c)
	}
	src, err := a.Chunk(ctx, c.ChunkID)
	if err != nil {
		t.Fatal(err)
	}
	if src.Document != "lighthouse.md" {
		t.Errorf("cut %s, want the best passage, lighthouse.md", src.Document)
	}
	next := askIn("and when does the keeper light it", first.ChatID)
	if next.CachedTokens < first.PromptTokens {
		t.Errorf("follow-up reused %d tokens of the previous %d-token prompt: the cut turn was not rendered as sent",
			next.CachedTokens, first.PromptTokens)
	}
}

// TestRestartRestoresWarmPrefix: the system prefix's KV is saved at the
// first warm-up and restored by the next app on the same data folder,
// which then answers from it as from a prefilled one.
func TestRestartRestoresWarmPrefix(t *testing.T) {
	dir := setup(t)
	data := t.TempDir()
	open := func() *app.App {
		a, err := app.New(context.Background(), app.Config{DataDir: data, Warm: true, ChatModel: filepath.Join(dir, "chat.gguf"),
			WorkerCmd: []string{os.Args[0], "parse-worker"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.WaitWarm(context.Background()); err != nil {
			t.Fatal(err)
		}
		return a
	}
	a := open()
	first := a.Warmed()
	speed := a.PrefillSpeed()
	a.Close()
	if first.Restored || first.Tokens < 20 || first.PrefillMs <= 0 {
		t.Fatalf("first warm-up %+v: want a prefill of the system prefix", first)
	}
	b := open()
	defer b.Close()
	// The restored prefix measures nothing: the speed the first run measured
	// is kept, so the first question is sized by it, not by a guess.
	if got := b.PrefillSpeed(); speed <= 0 || got != speed {
		t.Errorf("prefill speed after a restart %.1f tok/s, want the %.1f measured before it", got, speed)
	}
	again := b.Warmed()
	if !again.Restored || again.Tokens != first.Tokens || again.RestoreMs <= 0 {
		t.Fatalf("warm-up after a restart %+v: want the %d-token prefix restored", again, first.Tokens)
	}
	t.Logf("system prefix of %d tokens: prefill %.1f ms, restore %.1f ms", first.Tokens, first.PrefillMs, again.RestoreMs)
	r := ask(t, b, "when does the river market open", 0)
	if r.trace.ContextBudgetFrom != app.BudgetSaved {
		t.Errorf("the first question's passage budget (%d tokens) came from %q, want %q", r.trace.ContextBudget, r.trace.ContextBudgetFrom, app.BudgetSaved)
	}
	if r.trace.CachedTokens < first.Tokens {
		t.Errorf("after the restore a question reused %d tokens, fewer than the %d-token prefix", r.trace.CachedTokens, first.Tokens)
	}
}

// TestDataFolderPrivate: the data folder is 0700 and the database files
// 0600, also when an older Lore (or the user) left them readable by others.
func TestDataFolderPrivate(t *testing.T) {
	ctx := context.Background()
	perm := func(p string) os.FileMode {
		t.Helper()
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return st.Mode().Perm()
	}
	cases := []struct {
		name    string
		prepare func(dir string) // before app.New
	}{
		{"new folder", func(dir string) {}},
		{"folder exists 0755", func(dir string) { os.Mkdir(dir, 0o755) }},
		{"folder 0777 and files 0644 from an earlier run", func(dir string) {
			a, err := app.New(ctx, app.Config{DataDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			a.Close()
			for _, f := range []string{"lore.db", "lore.db-wal", "lore.db-shm"} {
				os.Chmod(filepath.Join(dir, f), 0o644)
			}
			os.Chmod(dir, 0o777)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			c.prepare(dir)
			a, err := app.New(ctx, app.Config{DataDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			// A write, so the WAL and shared-memory files exist.
			if err := a.SaveSettings(ctx, a.Settings()); err != nil {
				t.Fatal(err)
			}
			if m := perm(dir); m != 0o700 {
				t.Errorf("data folder %v, want 0700", m)
			}
			for _, f := range []string{"lore.db", "lore.db-wal", "lore.db-shm"} {
				p := filepath.Join(dir, f)
				if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) && f != "lore.db" {
					continue // checkpointed away
				}
				if m := perm(p); m != 0o600 {
					t.Errorf("%s %v, want 0600", f, m)
				}
			}
		})
	}
}

func TestRunFlagsNotSaved(t *testing.T) {
	// The command line's choices hold for one run: saving settings (the UI
	// sends every field back) keeps the stored values under them, unless
	// the user changed a field to something else.
	data := t.TempDir()
	open := func(cfg app.Config) *app.App {
		t.Helper()
		cfg.DataDir = data
		a, err := app.New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	const flagURL, userURL = "http://127.0.0.1:9/v1", "http://127.0.0.1:8/v1"
	a := open(app.Config{ChatURL: flagURL, ChatURLModel: "m", Speculate: 3})
	s := a.Settings()
	if s.ChatURL != flagURL || s.Speculate != 3 {
		t.Fatalf("this run's settings %q speculate %d: the flags do not apply", s.ChatURL, s.Speculate)
	}
	s.TopK = 7
	if err := a.SaveSettings(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if got := a.Settings(); got.ChatURL != flagURL || got.TopK != 7 {
		t.Errorf("after saving: %q top_k %d, want the flag's URL and 7 for this run", got.ChatURL, got.TopK)
	}
	a.Close()

	a = open(app.Config{})
	s = a.Settings()
	if s.ChatURL != "" || s.ChatURLModel != "" || s.Speculate != 0 || s.TopK != 7 {
		t.Errorf("next run without flags: chat_url %q model %q speculate %d top_k %d; want the flags gone, top_k kept",
			s.ChatURL, s.ChatURLModel, s.Speculate, s.TopK)
	}
	a.Close()

	a = open(app.Config{ChatURL: flagURL, ChatURLModel: "m"})
	s = a.Settings()
	s.ChatURL, s.ChatURLModel = userURL, "n" // the user's own choice over the flag's is saved
	if err := a.SaveSettings(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	a.Close()
	a = open(app.Config{})
	if s := a.Settings(); s.ChatURL != userURL || s.ChatURLModel != "n" {
		t.Errorf("chat_url %q model %q, want the user's %q and n", s.ChatURL, s.ChatURLModel, userURL)
	}
	a.Close()

	// A deliberate choice that happens to be the flag's value is saved too:
	// back from the user's URL to the flag's, within one run.
	a = open(app.Config{ChatURL: flagURL, ChatURLModel: "m"})
	s = a.Settings()
	s.ChatURL = userURL
	if err := a.SaveSettings(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	s.ChatURL = flagURL
	if err := a.SaveSettings(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	a.Close()
	a = open(app.Config{})
	defer a.Close()
	if s := a.Settings(); s.ChatURL != flagURL {
		t.Errorf("chat_url %q, want %q: the user chose it last", s.ChatURL, flagURL)
	}
}

func TestAPIKeyFromEnvironmentChecked(t *testing.T) {
	// `export LORE_API_KEY=$(cat file)` keeps no newline, but a file read
	// otherwise may: trimmed. A key that cannot go into a header is refused
	// at start, not at the first question.
	cfg := app.Config{DataDir: t.TempDir(), ChatURL: "http://127.0.0.1:9/v1", ChatURLModel: "m", APIKey: "sk-1\n"}
	a, err := app.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("a key with a trailing newline: %v", err)
	}
	a.Close()
	cfg.APIKey = "sk\x01x"
	if _, err := app.New(context.Background(), cfg); !errors.Is(err, app.ErrInvalid) || strings.Contains(err.Error(), cfg.APIKey) {
		t.Errorf("a key with a control character: %v, want ErrInvalid without the key", err)
	}
}
