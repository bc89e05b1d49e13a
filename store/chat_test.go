package store

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMessageKeepsTurn: a question keeps its turn's passages and an answer its
// sources and whether it was stopped, as given; turns stored without them read back
// with none.
func TestMessageKeepsTurn(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	db := fx.db
	c, err := db.NewChat(ctx, fx.ws.ID, "volcanoes")
	if err != nil {
		t.Fatal(err)
	}
	q, err := db.AppendMessage(ctx, Message{ChatID: c.ID, Role: "user", Content: "how hot is lava", RequestID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	passages := json.RawMessage(`[{"n":1,"chunk_id":7,"text":"lava … 1200 degrees"}]`)
	if err := db.SetPassages(ctx, q.ID, passages); err != nil {
		t.Fatal(err)
	}
	if err := db.SetPassages(ctx, 999, passages); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetPassages of a missing message: %v, want ErrNotFound", err)
	}
	sources := json.RawMessage(`[{"n":1,"chunk_id":7,"document":"volcanoes.md"}]`)
	for _, m := range []Message{
		{ChatID: c.ID, Role: "assistant", Content: "Lava reaches", RequestID: "r1", Sources: sources, Stopped: true},
		{ChatID: c.ID, Role: "user", Content: "and ash?"},
		{ChatID: c.ID, Role: "assistant", Content: "Ash grounds aircraft [1]."},
	} {
		if _, err := db.AppendMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := db.Messages(ctx, c.ID)
	if err != nil || len(ms) != 4 {
		t.Fatalf("Messages = %+v, %v", ms, err)
	}
	tests := []struct {
		i                 int
		passages, sources string
		stopped           bool
		content           string
	}{
		{0, string(passages), "", false, "how hot is lava"},
		{1, "", string(sources), true, "Lava reaches"}, // the text as it came, no "[stopped]"
		{2, "", "", false, "and ash?"},
		{3, "", "", false, "Ash grounds aircraft [1]."},
	}
	for _, tt := range tests {
		m := ms[tt.i]
		if string(m.Passages) != tt.passages || string(m.Sources) != tt.sources || m.Stopped != tt.stopped || m.Content != tt.content {
			t.Errorf("message %d: passages %s sources %s stopped %v content %q; want %s, %s, %v, %q",
				tt.i, m.Passages, m.Sources, m.Stopped, m.Content, tt.passages, tt.sources, tt.stopped, tt.content)
		}
		if (m.Passages == nil) != (tt.passages == "") || (m.Sources == nil) != (tt.sources == "") {
			t.Errorf("message %d: none stored must read back as nil", tt.i)
		}
	}
	// Of the questions, only one with a request id and no passages is one
	// stored before questions kept them.
	old, err := db.AppendMessage(ctx, Message{ChatID: c.ID, Role: "user", Content: "and pumice?", RequestID: "r3"})
	if err != nil {
		t.Fatal(err)
	}
	without, err := db.QuestionsWithoutPassages(ctx)
	if err != nil || len(without) != 1 || without[0].ID != old.ID || without[0].RequestID != "r3" || without[0].ChatID != c.ID {
		t.Errorf("QuestionsWithoutPassages = %+v, %v; want message %d of request r3 alone", without, err, old.ID)
	}
}

// TestSearchChats: a chat is found by a word said in any of its turns, not only by
// its title; every word must be in one turn (or the title); the last word may be
// unfinished; other workspaces' chats and deleted ones are never found.
func TestSearchChats(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	db := fx.db
	other, err := db.EnsureWorkspace(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	chat := func(ws int64, title string, turns ...string) int64 {
		t.Helper()
		c, err := db.NewChat(ctx, ws, title)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range turns {
			role := []string{"user", "assistant"}[i%2]
			if _, err := db.AppendMessage(ctx, Message{ChatID: c.ID, Role: role, Content: s}); err != nil {
				t.Fatal(err)
			}
		}
		return c.ID
	}
	expenses := chat(fx.ws.ID, "What is the expense policy?", "What is the expense policy?",
		"Travel is booked through the portal.", "and the hotel limit?", "Hotels up to 150 EUR a night [1].")
	holidays := chat(fx.ws.ID, "How do I book holidays?", "How do I book holidays?", "Ask your manager in the portal.")
	chat(other.ID, "Hotel reviews", "Which hotel is best?", "The one by the sea.")
	gone := chat(fx.ws.ID, "hotel to delete", "hotel")
	if err := db.DeleteChat(ctx, gone); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		query   string
		want    []int64
		snippet string // in the first match's snippet
	}{
		{"hotel", []int64{expenses}, "hotel"},
		{"HOTELS", []int64{expenses}, "hotel"},      // case and plural (porter)
		{"hot", []int64{expenses}, "hotel"},         // the last word as typed so far
		{"hotel limit", []int64{expenses}, "limit"}, // both in one turn
		{"hotel manager", nil, ""},                  // in no one turn or title
		{"portal", []int64{holidays, expenses}, ""}, // newest first
		{"holidays", []int64{holidays}, ""},         // title and turn
		{"expense", []int64{expenses}, ""},          // title
		{`"hotel" OR x*`, nil, ""},                  // operators are words: x is in no turn
		{"hotel) (", []int64{expenses}, "hotel"},    // nor can they break the query
		{"   ", nil, ""},                            // no words, nothing found
		{"sea", nil, ""},                            // another workspace's chat
	}
	for _, tt := range tests {
		got, err := db.SearchChats(ctx, fx.ws.ID, tt.query)
		if err != nil {
			t.Errorf("SearchChats(%q): %v", tt.query, err)
			continue
		}
		var ids []int64
		for _, m := range got {
			ids = append(ids, m.ID)
		}
		if !slices.Equal(ids, tt.want) {
			t.Errorf("SearchChats(%q) = %v, want %v", tt.query, ids, tt.want)
			continue
		}
		if tt.snippet != "" && !containsFold(got[0].Snippet, tt.snippet) {
			t.Errorf("SearchChats(%q): snippet %q lacks %q", tt.query, got[0].Snippet, tt.snippet)
		}
	}
	// A message stored after the search index was built is found too.
	if _, err := db.AppendMessage(ctx, Message{ChatID: holidays, Role: "user", Content: "and sabbaticals?"}); err != nil {
		t.Fatal(err)
	}
	if got, err := db.SearchChats(ctx, fx.ws.ID, "sabbatical"); err != nil || len(got) != 1 || got[0].ID != holidays {
		t.Errorf("SearchChats(sabbatical) = %+v, %v", got, err)
	}
	if err := db.Check(ctx); err != nil {
		t.Error(err)
	}
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// TestWorkspaceNamesUnique: creating or renaming to a name taken fails with
// ErrExists; renaming keeps everything in the workspace.
func TestWorkspaceNamesUnique(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	db := fx.db
	if _, err := db.CreateWorkspace(ctx, "main"); !errors.Is(err, ErrExists) {
		t.Errorf("CreateWorkspace(main) again: %v, want ErrExists", err)
	}
	papers, err := db.CreateWorkspace(ctx, "papers")
	if err != nil || papers.ID == 0 {
		t.Fatalf("CreateWorkspace(papers) = %+v, %v", papers, err)
	}
	fx.put(t, "a.txt", "zebras migrate")
	tests := []struct {
		id   int64
		name string
		want error
	}{
		{fx.ws.ID, "papers", ErrExists},
		{fx.ws.ID, "main", nil}, // its own name
		{fx.ws.ID, "notes", nil},
		{999, "nowhere", ErrNotFound},
	}
	for _, tt := range tests {
		if err := db.RenameWorkspace(ctx, tt.id, tt.name); !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
			t.Errorf("RenameWorkspace(%d, %q) = %v, want %v", tt.id, tt.name, err, tt.want)
		}
	}
	wss, err := db.Workspaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range wss {
		names = append(names, w.Name)
	}
	if !slices.Equal(names, []string{"notes", "papers"}) {
		t.Errorf("workspaces %v after the rename", names)
	}
	if hits, err := db.SearchBM25(ctx, fx.ws.ID, "zebras", 5); err != nil || len(hits) != 1 {
		t.Errorf("the renamed workspace lost its documents: %v, %v", hits, err)
	}
}

// TestLastUsed: a workspace's last use is its latest chat turn or request; one never
// asked anything has none.
func TestLastUsed(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	db := fx.db
	quiet, _ := db.EnsureWorkspace(ctx, "quiet")
	asked, _ := db.EnsureWorkspace(ctx, "asked")
	c, err := db.NewChat(ctx, fx.ws.ID, "hi")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1800000000, 0)
	if _, err := db.AppendMessage(ctx, Message{ChatID: c.ID, Role: "user", Content: "hi", Created: at}); err != nil {
		t.Fatal(err)
	}
	later := at.Add(time.Hour)
	if err := db.PutTrace(ctx, TraceRecord{RequestID: "r", WorkspaceID: asked.ID, Created: later}); err != nil {
		t.Fatal(err)
	}
	used, err := db.LastUsed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !used[fx.ws.ID].Equal(at) || !used[asked.ID].Equal(later) {
		t.Errorf("LastUsed = %v; want main at %v, asked at %v", used, at, later)
	}
	if _, ok := used[quiet.ID]; ok {
		t.Errorf("a workspace never asked anything has a last use: %v", used[quiet.ID])
	}
}
