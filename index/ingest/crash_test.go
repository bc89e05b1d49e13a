package ingest

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"lore/index/parse"
	"lore/store"
)

// The crash test re-runs this test binary as an indexing child and kills it.
const childEnv = "LORE_INGEST_CRASH_CHILD"

func TestMain(m *testing.M) {
	parse.MaybeServeWorker(os.Args) // a parse worker child process serves and exits here
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(crashChild(spec))
	}
	os.Exit(m.Run())
}

// crashChild indexes folder into the database at db ("db|folder") and exits.
func crashChild(spec string) int {
	dbPath, folder, _ := strings.Cut(spec, "|")
	ctx := context.Background()
	db, err := store.Open(ctx, dbPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	p := parse.New(parse.Options{})
	// A small delay per batch makes embedding take a while, so kills land in it too.
	ix := &Indexer{DB: db, Parser: p, Embedder: &hashEmbedder{model: "hash-8", delay: time.Millisecond}}
	fmt.Println("started")
	if _, err := ix.Run(ctx, "crash", []string{folder}, Options{EmbedBatch: 16}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestCrashRecovery kills an indexing process with SIGKILL at random moments, several
// times, checks the store after each kill, then finishes the index and checks that it is
// exactly what a clean run would have produced.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns and kills indexing processes for several seconds")
	}
	const nFiles = 3000
	dir := t.TempDir()
	root := filepath.Join(dir, "docs")
	dbPath := filepath.Join(dir, "lore.db")
	files := map[string]string{} // path → its unique marker word
	for i := range nFiles {
		marker := fmt.Sprintf("marker%05d", i)
		path := filepath.Join(root, fmt.Sprintf("d%02d", i%30), fmt.Sprintf("f%05d.txt", i))
		body := fmt.Sprintf("Note %d about %s.\n\nThe quick brown fox jumps over the lazy dog %d times.\n", i, marker, i)
		if i%7 == 0 {
			body += strings.Repeat("A longer paragraph that makes this note span more than one chunk of text. ", 60)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		files[path] = marker
	}

	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("seed %d", seed)
	// The first rounds kill on observed progress, read from the database (every
	// document commits on its own), so that whatever the machine's speed one kill
	// lands early in parsing, one past half way and one mid-embedding; random
	// delays follow as extra rounds.
	var midParse, midEmbed bool
	for round := range 6 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+dbPath+"|"+root)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait for the child to be running before the clock starts.
		buf := make([]byte, 8)
		if _, err := out.Read(buf); err != nil {
			t.Fatalf("round %d: child did not start: %v; %s", round, err, stderr.String())
		}
		t.Cleanup(func() { cmd.Process.Kill() }) // if a wait below fails the test
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		var when string
		switch round {
		case 0, 1:
			least := round * nFiles / 2
			when = fmt.Sprintf("once more than %d documents were stored", least)
			waitStore(t, dbPath, exited, func(docs, _ int) bool { return docs > least })
		case 2:
			when = "once embedding began"
			waitStore(t, dbPath, exited, func(docs, embedded int) bool { return docs == nFiles && embedded > 0 })
		default:
			delay := time.Duration(20+rng.IntN(1500)) * time.Millisecond
			when = "after " + delay.String()
			select {
			case err := <-exited:
				exited <- err // put back for the wait below (the child finished first)
			case <-time.After(delay):
			}
		}
		cmd.Process.Signal(syscall.SIGKILL) // fails harmlessly if it already exited
		if err := <-exited; err == nil {
			t.Logf("round %d: child finished before the kill %s", round, when)
		}
		st := inspect(t, dbPath)
		t.Logf("round %d: killed %s: %d documents, %d chunks, %d embedded", round, when, st.docs, st.chunks, st.embedded)
		midParse = midParse || st.docs < nFiles
		midEmbed = midEmbed || (st.docs == nFiles && st.embedded > 0 && st.embedded < st.chunks)
	}
	if !midParse || !midEmbed {
		t.Errorf("kills interrupted parsing: %v, embedding: %v; want both", midParse, midEmbed)
	}

	// Finish in-process, then a second run must find nothing to do.
	ctx := context.Background()
	db, err := store.Open(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p := parse.New(parse.Options{})
	defer p.Close()
	emb := &hashEmbedder{model: "hash-8"}
	ix := &Indexer{DB: db, Parser: p, Embedder: emb}
	sum, err := ix.Run(ctx, "crash", []string{root}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("final run: %+v", sum)
	if sum.Files != nFiles || len(sum.Errors) != 0 || sum.Indexed+sum.Unchanged != nFiles || sum.Deleted != 0 {
		t.Errorf("final run summary %+v", sum)
	}
	again, err := ix.Run(ctx, "crash", []string{root}, Options{})
	if err != nil || again.Unchanged != nFiles || again.Indexed != 0 || again.Embedded != 0 {
		t.Errorf("run after completion: %+v, %v", again, err)
	}

	if err := db.Check(ctx); err != nil { // integrity, FK, FTS rows == chunks, no orphans
		t.Fatal(err)
	}
	st := inspect(t, dbPath)
	if st.docs != nFiles || st.distinctPaths != nFiles || st.notIndexed != 0 || st.embedded != st.chunks || st.badOrdinals != 0 {
		t.Errorf("final store: %+v", st)
	}
	ws, _ := db.EnsureWorkspace(ctx, "crash")
	for path, marker := range files {
		if rng.IntN(30) != 0 {
			continue // a sample is enough
		}
		hits, err := db.SearchBM25(ctx, ws.ID, marker, 5)
		if err != nil || len(hits) != 1 || hits[0].Path != path {
			t.Errorf("search %s = %+v, %v; want exactly %s", marker, hits, err, path)
		}
	}
}

// waitStore polls the database until done(documents, embeddings) holds, or
// the child exits (it is then left in exited for the caller).
func waitStore(t *testing.T, path string, exited chan error, done func(docs, embedded int) bool) {
	t.Helper()
	raw, err := sql.Open("sqlite3", "file:"+path+"?_query_only=1&_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			exited <- err
			return
		case <-time.After(2 * time.Millisecond):
		}
		var docs, embedded int
		if err := raw.QueryRow(`SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM embeddings)`).Scan(&docs, &embedded); err != nil {
			continue // the child may be mid-checkpoint
		}
		if done(docs, embedded) {
			return
		}
	}
	t.Fatal("the awaited progress never came")
}

type storeState struct {
	docs, distinctPaths, notIndexed, chunks, embedded, badOrdinals int
}

// inspect opens the database as a fresh process would (recovering the WAL), runs the
// store's consistency check, and counts what is there.
func inspect(t *testing.T, path string) storeState {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Check(ctx); err != nil {
		t.Fatalf("inconsistent store after kill: %v", err)
	}
	db.Close()
	raw, err := sql.Open("sqlite3", "file:"+path+"?_query_only=1")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var s storeState
	err = raw.QueryRow(`SELECT
		(SELECT count(*) FROM documents),
		(SELECT count(DISTINCT path) FROM documents),
		(SELECT count(*) FROM documents WHERE status != 'indexed'),
		(SELECT count(*) FROM chunks),
		(SELECT count(*) FROM embeddings),
		(SELECT count(*) FROM (SELECT document_id FROM chunks GROUP BY document_id
			HAVING count(*) != max(ordinal) + 1 OR min(ordinal) != 0))`).
		Scan(&s.docs, &s.distinctPaths, &s.notIndexed, &s.chunks, &s.embedded, &s.badOrdinals)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
