package weights

import "os"

// TB is the part of testing.TB that Require uses (this package does not
// import testing).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
}

// Require returns m's path in the model cache, for a test that needs the
// real file. When the model was never fetched the test is skipped, so a
// plain `go test` on a machine that never ran `make models` passes; but
// when LORE_REAL_MODELS=1 (the Makefile sets it after fetching the
// models) a missing model is a bug in the fetch or the cache path, and the
// test fails instead of quietly skipping.
func Require(t TB, m Model) string {
	t.Helper()
	dir, err := Dir()
	if err == nil && m.Fetched(dir) {
		return m.Path(dir)
	}
	where := dir
	if err != nil {
		where = err.Error()
	}
	if os.Getenv("LORE_REAL_MODELS") == "1" {
		t.Fatalf("real model %s not fetched (%s) although LORE_REAL_MODELS=1: the fetch should have put it there", m.Name, where)
	}
	t.Skipf("real model %s not fetched (%s): run `make models` (bin/lore models fetch)", m.Name, where)
	return ""
}
