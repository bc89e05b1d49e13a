package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"lore/app"
	"lore/store"
)

// TestChatKeepsCitations: a chat read back has each answer's sources as they
// were shown (numbers, chunks, documents, the texts its prompt held) and its
// trace; a follow-up numbers on from the first turn's sources; search finds
// the chat by a word said in a turn.
func TestChatKeepsCitations(t *testing.T) {
	ctx := context.Background()
	a := newApp(t, opts{chat: true})
	first := ask(t, a, "when does the river market open", 0)
	second := ask(t, a, "and what grows in the small garden", first.trace.ChatID)
	if len(first.sources) == 0 || len(second.sources) <= len(first.sources) {
		t.Fatalf("sources %d then %d: want the follow-up to number on from the first turn's", len(first.sources), len(second.sources))
	}
	chat, err := a.Chat(ctx, first.trace.ChatID)
	if err != nil {
		t.Fatal(err)
	}
	if len(chat.Messages) != 4 {
		t.Fatalf("chat has %d messages, want 4", len(chat.Messages))
	}
	for i, r := range []*recorded{first, second} {
		m := chat.Messages[2*i+1]
		if m.Role != "assistant" || m.Stopped || m.RequestID != r.trace.RequestID {
			t.Errorf("answer %d: %+v", i+1, m)
		}
		if len(m.Sources) != len(r.sources) {
			t.Fatalf("answer %d: %d sources stored, %d shown", i+1, len(m.Sources), len(r.sources))
		}
		for j, s := range m.Sources {
			want := r.sources[j]
			if s.N != want.N || s.ChunkID != want.ChunkID || s.Document != want.Document || s.Path != want.Path ||
				s.Heading != want.Heading || s.LineStart != want.LineStart || s.Scores != want.Scores || s.Text != want.Text {
				t.Errorf("answer %d source %d: stored %+v, shown %+v", i+1, j+1, s, want)
			}
		}
		var tr app.Trace
		if err := json.Unmarshal(m.Trace, &tr); err != nil || tr.RequestID != r.trace.RequestID || tr.Stages[app.StageTTFT] <= 0 {
			t.Errorf("answer %d: trace %s (%v)", i+1, m.Trace, err)
		}
	}
	wss, err := a.Workspaces(ctx)
	if err != nil || len(wss) != 1 || wss[0].LastUsed == nil {
		t.Errorf("workspaces %+v, %v: want default, last used now", wss, err)
	}
	found, err := a.SearchChats(ctx, "", "garden")
	if err != nil || len(found) != 1 || found[0].ID != first.trace.ChatID || !strings.Contains(found[0].Snippet, "garden") {
		t.Errorf("SearchChats(garden) = %+v, %v; want the river chat by its second turn", found, err)
	}
	if found, err := a.SearchChats(ctx, "", "orchestra"); err != nil || len(found) != 0 {
		t.Errorf("SearchChats(orchestra) = %+v, %v; want none", found, err)
	}
}

// TestStopThenRetry: the first event of a question that starts a chat names
// the chat, so a front door that stops the answer at once can continue it; the
// stopped answer is kept as it came, marked stopped, and the retry goes on in
// the same chat.
func TestStopThenRetry(t *testing.T) {
	ctx := context.Background()
	a := newApp(t, opts{chat: true})
	s := a.Settings()
	s.MaxTokens = 400
	if err := a.SaveSettings(ctx, s); err != nil {
		t.Fatal(err)
	}
	const q = "when does the river market open"
	stopCtx, stop := context.WithCancel(ctx)
	defer stop()
	var started app.Started
	var answer strings.Builder
	tokens := 0
	tr, err := a.Ask(stopCtx, app.AskRequest{Question: q}, func(ev app.Event) error {
		switch ev := ev.(type) {
		case app.Started:
			started = ev
		case app.Token:
			answer.WriteString(ev.Text)
			if tokens++; tokens == 3 {
				stop() // the user presses Stop
			}
		}
		return nil
	})
	if tr == nil {
		t.Fatalf("Ask: %v", err)
	}
	if started.ChatID == 0 || started.ChatID != tr.ChatID {
		t.Fatalf("the first event names chat %d, the trace %d: a stop before the end would lose the chat", started.ChatID, tr.ChatID)
	}
	if tr.StopReason != "cancel" {
		t.Fatalf("stop reason %q (%v): the answer was not stopped", tr.StopReason, err)
	}
	retry := ask(t, a, q, started.ChatID)
	if retry.trace.ChatID != started.ChatID {
		t.Errorf("the retry went to chat %d, not %d", retry.trace.ChatID, started.ChatID)
	}
	chats, err := a.Chats(ctx, "")
	if err != nil || len(chats) != 1 {
		t.Errorf("chats %+v, %v: want the one", chats, err)
	}
	chat, err := a.Chat(ctx, started.ChatID)
	if err != nil || len(chat.Messages) != 4 {
		t.Fatalf("chat %+v, %v: want question, stopped answer, question, answer", chat, err)
	}
	stopped, done := chat.Messages[1], chat.Messages[3]
	if !stopped.Stopped || strings.Contains(stopped.Content, "[stopped]") || stopped.Content != answer.String() {
		t.Errorf("stopped answer stored as %+v; want what came (%q), marked stopped", stopped, answer.String())
	}
	if done.Stopped {
		t.Error("the retried answer is marked stopped")
	}
}

// TestWorkspaceNames: a new workspace's name follows app.NameRule and is not
// taken; rename and delete say what went wrong, leave the default alone, and
// indexing never brings back a workspace renamed or deleted.
func TestWorkspaceNames(t *testing.T) {
	ctx := context.Background()
	a := newApp(t, opts{})
	tests := []struct {
		name string
		want error
	}{
		{"notes", nil},
		{"My Notes", nil},
		{"  papers  ", nil}, // trimmed
		{"Été 2024_v1.2-final", nil},
		{"notes", app.ErrExists},
		{"default", app.ErrExists},
		{"", app.ErrInvalid},
		{"   ", app.ErrInvalid},
		{"My Notes!", app.ErrInvalid},
		{"../../etc", app.ErrInvalid},
		{"a/b", app.ErrInvalid},
		{"a\nb", app.ErrInvalid},
		{"-flag", app.ErrInvalid},
		{".hidden", app.ErrInvalid},
		{strings.Repeat("x", 65), app.ErrInvalid},
	}
	for _, tt := range tests {
		_, err := a.CreateWorkspace(ctx, tt.name)
		if !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
			t.Errorf("CreateWorkspace(%q) = %v, want %v", tt.name, err, tt.want)
		}
		if errors.Is(err, app.ErrInvalid) && !strings.Contains(err.Error(), "letters, digits, spaces") {
			t.Errorf("CreateWorkspace(%q): %v does not say which names are allowed", tt.name, err)
		}
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "owl.md"), []byte("# Owls\n\nOwls hunt at night.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Index(ctx, "notes", []string{dir}, nil); err != nil {
		t.Fatal(err)
	}
	renames := []struct {
		from, to string
		want     error
	}{
		{"notes", "papers", app.ErrExists},
		{"notes", "bad/name", app.ErrInvalid},
		{"default", "main", app.ErrInvalid},
		{"nosuch", "other", app.ErrNotFound},
		{"notes", "birds", nil},
	}
	for _, tt := range renames {
		_, err := a.RenameWorkspace(ctx, tt.from, tt.to)
		if !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
			t.Errorf("RenameWorkspace(%q, %q) = %v, want %v", tt.from, tt.to, err, tt.want)
		}
	}
	// The renamed workspace keeps its documents and indexes under its new name.
	if sum, err := a.Index(ctx, "birds", nil, nil); err != nil || sum.Unchanged != 1 {
		t.Errorf("Index(birds) = %+v, %v; want its one document unchanged", sum, err)
	}
	if err := a.StartIndex(ctx, "birds"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.IndexStatus(ctx, "notes"); !errors.Is(err, app.ErrNotFound) {
		t.Errorf("the old name still answers: %v", err)
	}

	deletes := []struct {
		name string
		want error
	}{
		{"default", app.ErrInvalid},
		{"nosuch", app.ErrNotFound},
		{"birds", nil},
		{"birds", app.ErrNotFound},
	}
	for _, tt := range deletes {
		err := a.DeleteWorkspace(ctx, tt.name)
		if !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
			t.Errorf("DeleteWorkspace(%q) = %v, want %v", tt.name, err, tt.want)
		}
	}
	wss, err := a.Workspaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range wss {
		names = append(names, w.Name)
	}
	if want := []string{"My Notes", "default", "papers", "Été 2024_v1.2-final"}; !slices.Equal(names, want) {
		t.Errorf("workspaces %q, want %q (a run came back for one deleted or renamed?)", names, want)
	}
}

// TestBackfillPassages: a question stored before questions kept their turn's
// passages gets them, when the app opens, from its trace: as its turn sent
// them, so a follow-up lays that turn out again byte for byte.
func TestBackfillPassages(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	a := newApp(t, opts{chat: true, data: data})
	r := ask(t, a, "when does the river market open", 0)
	a.Close()

	db, err := store.Open(ctx, filepath.Join(data, "lore.db"))
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := db.Messages(ctx, r.trace.ChatID)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("messages %+v, %v", msgs, err)
	}
	sent := msgs[0].Passages
	var ss app.Sources
	if err := json.Unmarshal(sent, &ss); err != nil || len(ss) == 0 {
		t.Fatalf("the question kept passages %s (%v): want its turn's", sent, err)
	}
	if err := db.SetPassages(ctx, msgs[0].ID, nil); err != nil { // as an older Lore stored it
		t.Fatal(err)
	}
	db.Close()

	b, err := app.New(ctx, app.Config{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	db, err = store.Open(ctx, filepath.Join(data, "lore.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	msgs, err = db.Messages(ctx, r.trace.ChatID)
	if err != nil {
		t.Fatal(err)
	}
	// What the prompt rendered: not the retrieval scores, which only the
	// live question had.
	var got app.Sources
	if err := json.Unmarshal(msgs[0].Passages, &got); err != nil {
		t.Fatalf("backfilled passages %s: %v", msgs[0].Passages, err)
	}
	for i := range ss {
		ss[i].Scores = app.Scores{}
	}
	if !slices.Equal(got, ss) {
		t.Errorf("passages read back from the trace:\n%+v\nwant as the turn sent them:\n%+v", got, ss)
	}
	if left, err := db.QuestionsWithoutPassages(ctx); err != nil || len(left) != 0 {
		t.Errorf("questions still without passages: %+v, %v", left, err)
	}
}
