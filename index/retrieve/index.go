package retrieve

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"lore/index/vector"
)

// The vector index of a workspace and embedding model lives in memory as a
// vector.Auto built from the store's embeddings (the source of truth). It is
// persisted as two files in the Retriever's folder: the graph (vector's
// format) and the chunk ids with a fingerprint of each vector. The setting
// "vector/<ws>/<model>" records the generation they reflect and the SHA-256
// of both; a file that does not match is never used, the index is rebuilt.
//
// Chunk ids alone cannot tell what changed: SQLite reuses the highest rowid
// after a delete, so a re-indexed document often gets its old chunk ids back
// with new text. The fingerprints catch that.

type indexKey struct {
	ws    int64
	model string
}

// vecState is one workspace's index for one model.
type vecState struct {
	ws    int64
	model string

	// refreshMu serialises refreshes and guards the fields below it.
	refreshMu sync.Mutex
	fps       map[int64]uint64 // fingerprints of the vectors in the index
	dirty     int              // changes not yet written to disk
	rec       *indexRecord     // what the setting says about the files on disk

	mu       sync.RWMutex
	v        indexView
	inflight chan struct{} // closed when the running background refresh ends
	lastErr  error
	failedAt time.Time // of the last failed refresh
}

// indexView is what searches use; swapped whole under vecState.mu.
type indexView struct {
	idx   *vector.Auto // nil when the store holds no vectors from the model
	dim   int
	gen   int64 // store generation the index reflects
	ready bool  // loaded or built at least once
}

func (st *vecState) view() indexView {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return st.v
}

func (st *vecState) install(idx *vector.Auto, dim int, gen int64) {
	st.mu.Lock()
	st.v = indexView{idx: idx, dim: dim, gen: gen, ready: true}
	st.mu.Unlock()
}

func (st *vecState) err() error {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return st.lastErr
}

func (st *vecState) setErrLocked(err error) {
	st.lastErr = err
	if err != nil {
		st.failedAt = time.Now()
	}
}

// refreshed records how a refresh ended.
func (r *Retriever) refreshed(st *vecState, err error) {
	if err != nil {
		r.failures.Add(1)
	}
	st.mu.Lock()
	st.setErrLocked(err)
	st.mu.Unlock()
}

// Vectors is the number of vectors in the workspace's loaded index (0 when
// there is no embedding model or no index yet).
func (r *Retriever) Vectors(ws int64) int {
	if r.emb == nil {
		return 0
	}
	if v := r.state(ws, r.emb.ID()).view(); v.idx != nil {
		return v.idx.Len()
	}
	return 0
}

func (r *Retriever) state(ws int64, model string) *vecState {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := indexKey{ws, model}
	st := r.indexes[k]
	if st == nil {
		st = &vecState{ws: ws, model: model, fps: map[int64]uint64{}}
		r.indexes[k] = st
	}
	return st
}

// current returns the index to search for generation gen. An index that
// lags gen is returned (stale) while a refresh runs behind it: ids it still
// holds for deleted chunks are dropped when their text is fetched. With no
// index yet, it waits up to Config.IndexWait for one.
func (r *Retriever) current(ctx context.Context, st *vecState, gen int64) (indexView, bool, error) {
	v := st.view()
	if v.ready && v.gen >= gen {
		return v, false, nil
	}
	done := r.kick(st)
	if v.ready {
		return v, true, nil
	}
	if done == nil {
		return v, false, errors.New("vector index not loaded and the retriever is closed")
	}
	if r.cfg.IndexWait < 0 {
		return v, false, errBuilding
	}
	t := time.NewTimer(r.cfg.IndexWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		return v, false, errBuilding
	case <-ctx.Done():
		return v, false, ctx.Err()
	}
	if v = st.view(); !v.ready {
		err := st.err()
		if err == nil {
			err = errBuilding
		}
		return v, false, fmt.Errorf("vector index: %w", err)
	}
	return v, v.gen < gen, nil
}

// refreshRetry spaces out background refreshes after one failed, so that a
// persistent fault (a corrupt row, say) does not cost a full read of the
// vectors on every search. Refresh itself always tries.
const refreshRetry = 30 * time.Second

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// kick starts a background refresh of st unless one is running or one
// failed lately, and returns a channel closed when it ends (nil once the
// Retriever is closed).
func (r *Retriever) kick(st *vecState) <-chan struct{} {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.wg.Add(1)
	r.mu.Unlock()

	st.mu.Lock()
	if ch := st.inflight; ch != nil {
		st.mu.Unlock()
		r.wg.Done()
		return ch
	}
	if st.lastErr != nil && time.Since(st.failedAt) < refreshRetry {
		st.mu.Unlock()
		r.wg.Done()
		return closedChan
	}
	ch := make(chan struct{})
	st.inflight = ch
	st.mu.Unlock()
	go func() {
		defer r.wg.Done()
		err := r.refresh(r.bg, st, false)
		if err != nil {
			r.failures.Add(1)
		}
		st.mu.Lock()
		st.inflight = nil
		st.setErrLocked(err)
		st.mu.Unlock()
		close(ch)
	}()
	return ch
}

// Preload starts loading (or building) the vector index of workspace ws in
// the background, so that the first search need not wait for it. Without
// an embedder it does nothing.
func (r *Retriever) Preload(ws int64) {
	if r.emb != nil {
		r.kick(r.state(ws, r.emb.ID()))
	}
}

// Refresh brings the vector index of workspace ws up to date with the store
// and writes it to disk. Call it after indexing; Search also starts one
// (in the background) when it sees the generation move. Without an
// embedder it does nothing.
func (r *Retriever) Refresh(ctx context.Context, ws int64) error {
	if r.emb == nil {
		return nil
	}
	st := r.state(ws, r.emb.ID())
	err := r.refresh(ctx, st, true)
	r.refreshed(st, err)
	if err != nil {
		return fmt.Errorf("retrieve: refresh vector index of workspace %d: %w", ws, err)
	}
	return nil
}

// Persisting a large graph costs seconds, so a background refresh writes
// only once this share of the index changed; Refresh always writes. An
// unwritten change is never lost: the file on disk stays valid for its own
// generation and the next load brings it up to date.
const lazyPersistShare = 10

func (r *Retriever) refresh(ctx context.Context, st *vecState, explicit bool) error {
	st.refreshMu.Lock()
	defer st.refreshMu.Unlock()
	gen, err := r.db.Generation(ctx, st.ws)
	if err != nil {
		return err
	}
	v := st.view()
	if v.ready && v.gen >= gen {
		if explicit && st.dirty > 0 {
			return r.persist(ctx, st, v.idx, v.dim, v.gen)
		}
		return nil
	}

	idx, dim, fps, since, reason := v.idx, v.dim, st.fps, v.gen, "index was empty"
	if !v.ready {
		l, err := r.load(ctx, st)
		switch {
		case err != nil:
			idx, reason = nil, "persisted index not used: "+err.Error()
		case l.rec.Generation == gen:
			st.fps, st.dirty, st.rec = l.fps, 0, &l.rec
			st.install(l.idx, l.dim, gen)
			r.loads.Add(1)
			return nil
		default:
			r.loads.Add(1)
			st.rec = &l.rec
			idx, dim, fps, since = l.idx, l.dim, l.fps, l.rec.Generation
			if since > gen { // the database is older than the file: trust nothing
				since = 0
			}
		}
	}
	if idx != nil {
		n, err := r.update(ctx, st, idx, dim, fps, since)
		switch {
		case err == nil:
			st.fps = fps
			st.dirty += n
			if n > 0 {
				r.updates.Add(1)
			}
			st.install(idx, dim, gen)
			if st.dirty == 0 || explicit || st.dirty*lazyPersistShare >= len(fps) {
				return r.persist(ctx, st, idx, dim, gen)
			}
			return nil
		case errors.Is(err, errRebuild):
			reason = err.Error()
		default:
			return err
		}
	}

	idx, dim, fps, err = r.build(ctx, st)
	if err != nil {
		return err
	}
	r.builds.Add(1)
	r.lastRebuild.Store(&reason)
	st.fps = fps
	st.dirty = len(fps) + 1
	st.install(idx, dim, gen)
	return r.persist(ctx, st, idx, dim, gen)
}

// buildBatch is how many vectors go to HNSW.AddBatch at a time while
// streaming from the store: enough to keep the workers busy, little memory.
const buildBatch = 4096

// build reads every vector of the model from the store into a new index:
// exact while small, HNSW (built in parallel batches) past the crossover.
func (r *Retriever) build(ctx context.Context, st *vecState) (*vector.Auto, int, map[int64]uint64, error) {
	crossover := r.cfg.Vector.Crossover
	if crossover <= 0 {
		crossover = vector.DefaultCrossover
	}
	fps := map[int64]uint64{}
	var (
		dim  int
		ids  []int64
		vecs [][]float32
		h    *vector.HNSW
	)
	flush := func() error {
		err := h.AddBatch(ctx, ids, vecs)
		ids, vecs = ids[:0], vecs[:0]
		return err
	}
	err := r.db.Vectors(ctx, st.ws, st.model, 0, func(id int64, vec []float32) error {
		if dim == 0 {
			dim = len(vec)
		} else if len(vec) != dim {
			return fmt.Errorf("chunk %d has a %d-dimensional vector, others %d", id, len(vec), dim)
		}
		fps[id] = fingerprint(vec)
		vector.Normalize(vec)
		ids, vecs = append(ids, id), append(vecs, vec)
		switch {
		case h == nil && len(ids) > crossover:
			var err error
			if h, err = vector.NewHNSW(dim, r.cfg.Vector); err != nil {
				return err
			}
			return flush()
		case h != nil && len(ids) >= buildBatch:
			return flush()
		}
		return nil
	})
	if err == nil && h != nil && len(ids) > 0 {
		err = flush()
	}
	if err != nil {
		return nil, 0, nil, fmt.Errorf("build: %w", err)
	}
	if dim == 0 {
		return nil, 0, fps, nil
	}
	var inner vector.Index = h
	if h == nil {
		e, err := vector.NewExact(dim)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("build: %w", err)
		}
		for i, id := range ids {
			if err := e.Add(id, vecs[i]); err != nil {
				return nil, 0, nil, fmt.Errorf("build: chunk %d: %w", id, err)
			}
		}
		inner = e
	}
	a, err := vector.AutoFrom(inner, r.cfg.Vector)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("build: %w", err)
	}
	return a, dim, fps, nil
}

// errRebuild means an incremental update would cost about as much as a
// full build (or cannot be done), so build instead.
var errRebuild = errors.New("rebuild")

type pendingVec struct {
	id  int64
	fp  uint64
	vec []float32
}

// update brings idx, whose vectors' fingerprints are fps and which holds
// every vector up to generation since, in line with the store: it reads the
// vectors written after since and the ids of all (cheap), adds those whose
// chunk id is new or whose fingerprint changed, and deletes the ids the
// store no longer has. fps is kept equal to the index's content after every
// step, so an update cut short (ctx) leaves a consistent pair that the next
// update continues from. It returns the number of changes.
func (r *Retriever) update(ctx context.Context, st *vecState, idx *vector.Auto, dim int, fps map[int64]uint64, since int64) (int, error) {
	_, graph := idx.Inner().(*vector.HNSW)
	// An HNSW insertion costs as much in an update as in a build (more: a
	// build adds in parallel) and deletions leave tombstones, so past half
	// the index changing, building afresh is cheaper. Exact updates are cheap.
	limit := math.MaxInt
	if graph {
		limit = len(fps) / 2
	}
	ids, err := r.db.VectorIDs(ctx, st.ws, st.model)
	if err != nil {
		return 0, err
	}
	pend, err := r.changed(ctx, st, dim, fps, since, limit)
	if err != nil {
		return 0, err
	}
	// A stored vector that is neither indexed nor new breaks the premise
	// (say, an index file older than the generations the store records):
	// compare every vector instead.
	if since > 0 && lacks(ids, fps, pend) {
		if pend, err = r.changed(ctx, st, dim, fps, 0, limit); err != nil {
			return 0, err
		}
	}
	stored := make(map[int64]struct{}, len(ids))
	for _, id := range ids {
		stored[id] = struct{}{}
	}
	var gone []int64
	for id := range fps {
		if _, ok := stored[id]; !ok {
			gone = append(gone, id)
		}
	}
	if len(pend)+len(gone) > limit {
		return 0, fmt.Errorf("%w: %d of %d vectors changed", errRebuild, len(pend)+len(gone), len(fps))
	}
	// Deletions first: a search running meanwhile may miss a new passage
	// for a moment but never gets a removed one from the index.
	for i, id := range gone {
		if i%1024 == 0 && ctx.Err() != nil {
			return 0, ctx.Err()
		}
		idx.Delete(id)
		delete(fps, id)
	}
	for i, p := range pend {
		if i%256 == 0 && ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if err := idx.Add(p.id, p.vec); err != nil {
			return 0, fmt.Errorf("update: chunk %d: %w", p.id, err)
		}
		fps[p.id] = p.fp
	}
	// Tombstones still cost every search; drop them once they are a fifth
	// of the graph (vector's advice).
	if h, ok := idx.Inner().(*vector.HNSW); ok && h.Deleted()*5 > h.Len() {
		if err := idx.Rebuild(ctx); err != nil && !errors.Is(err, vector.ErrRebuilding) {
			return 0, fmt.Errorf("update: compact: %w", err)
		}
		r.compactions.Add(1)
	}
	return len(pend) + len(gone), nil
}

// changed returns the vectors written after generation since that the
// index does not hold as they are (new ids, or a changed fingerprint),
// normalised, failing with errRebuild past limit of them.
func (r *Retriever) changed(ctx context.Context, st *vecState, dim int, fps map[int64]uint64, since int64, limit int) ([]pendingVec, error) {
	var pend []pendingVec
	err := r.db.Vectors(ctx, st.ws, st.model, since, func(id int64, vec []float32) error {
		fp := fingerprint(vec)
		if old, ok := fps[id]; ok && old == fp {
			return nil
		}
		if len(vec) != dim {
			return fmt.Errorf("%w: chunk %d has a %d-dimensional vector, the index %d", errRebuild, id, len(vec), dim)
		}
		vector.Normalize(vec)
		pend = append(pend, pendingVec{id, fp, vec})
		if len(pend) > limit {
			return fmt.Errorf("%w: over half of %d vectors changed", errRebuild, len(fps))
		}
		return nil
	})
	return pend, err
}

// lacks reports whether a stored id is neither in the index nor pending.
func lacks(ids []int64, fps map[int64]uint64, pend []pendingVec) bool {
	var pending map[int64]struct{}
	for _, id := range ids {
		if _, ok := fps[id]; ok {
			continue
		}
		if pending == nil {
			pending = make(map[int64]struct{}, len(pend))
			for _, p := range pend {
				pending[p.id] = struct{}{}
			}
		}
		if _, ok := pending[id]; !ok {
			return true
		}
	}
	return false
}

// indexRecord is the setting that vouches for the files on disk.
type indexRecord struct {
	Version     int    `json:"version"`
	Generation  int64  `json:"generation"`
	Count       int    `json:"count"`
	Dim         int    `json:"dim"`
	File        string `json:"file,omitempty"` // graph, in the Retriever's folder
	Checksum    string `json:"checksum,omitempty"`
	IDsFile     string `json:"ids_file,omitempty"` // chunk ids and fingerprints
	IDsChecksum string `json:"ids_checksum,omitempty"`
}

const recordVersion = 1

func settingKey(ws int64, model string) string {
	return fmt.Sprintf("vector/%d/%s", ws, model)
}

// fileBase names a workspace's files for a model: readable, and unique
// through a hash since model ids may hold any character.
func fileBase(ws int64, model string) string {
	sum := sha256.Sum256([]byte(model))
	clean := strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' {
			return c
		}
		return '_'
	}, model)
	if len(clean) > 40 {
		clean = clean[:40]
	}
	return fmt.Sprintf("ws%d-%s-%s", ws, clean, hex.EncodeToString(sum[:4]))
}

// GraphPath returns where the graph of workspace ws for model is kept
// (useful to show, or to test recovery).
func (r *Retriever) GraphPath(ws int64, model string) string {
	if r.dir == "" {
		return ""
	}
	return filepath.Join(r.dir, fileBase(ws, model)+".vec")
}

func (r *Retriever) persist(ctx context.Context, st *vecState, idx *vector.Auto, dim int, gen int64) error {
	if r.dir == "" {
		st.dirty = 0
		return nil
	}
	rec := indexRecord{Version: recordVersion, Generation: gen, Dim: dim}
	if st.dirty == 0 && st.rec != nil {
		// The files already hold this content; only the generation moved.
		rec = *st.rec
		rec.Generation = gen
	} else if idx != nil {
		if err := os.MkdirAll(r.dir, 0o755); err != nil {
			return fmt.Errorf("persist: %w", err)
		}
		base := fileBase(st.ws, st.model)
		rec.File, rec.IDsFile = base+".vec", base+".ids"
		// Saving the graph takes its read lock; updates only happen under
		// refreshMu, held here, so graph and fingerprints match.
		sum, err := vector.SaveFile(filepath.Join(r.dir, rec.File), idx)
		if err != nil {
			return fmt.Errorf("persist: %w", err)
		}
		idsSum, err := vector.SaveFile(filepath.Join(r.dir, rec.IDsFile), fpFile(st.fps))
		if err != nil {
			return fmt.Errorf("persist: %w", err)
		}
		rec.Checksum, rec.IDsChecksum, rec.Count = sum, idsSum, idx.Len()
	}
	// Once the files are written, recording them is one small write that
	// Close's cancellation should not waste (the next start would rebuild).
	if err := r.db.PutSetting(context.WithoutCancel(ctx), settingKey(st.ws, st.model), rec); err != nil {
		return fmt.Errorf("persist: %w", err)
	}
	st.rec, st.dirty = &rec, 0
	return nil
}

type loaded struct {
	rec indexRecord
	idx *vector.Auto
	dim int
	fps map[int64]uint64
}

// load reads the persisted index if the setting vouches for it: right
// version, files where expected with the recorded checksums, counts that
// agree. Anything else is an error and the caller rebuilds.
func (r *Retriever) load(ctx context.Context, st *vecState) (loaded, error) {
	var l loaded
	if r.dir == "" {
		return l, errors.New("no index folder")
	}
	ok, err := r.db.Setting(ctx, settingKey(st.ws, st.model), &l.rec)
	if err != nil {
		return l, err
	}
	rec := l.rec
	base := fileBase(st.ws, st.model)
	switch {
	case !ok:
		return l, errors.New("none recorded")
	case rec.Version != recordVersion:
		return l, fmt.Errorf("record version %d, want %d", rec.Version, recordVersion)
	case rec.Count == 0:
		l.fps = map[int64]uint64{}
		return l, nil
	case rec.File != base+".vec" || rec.IDsFile != base+".ids":
		return l, fmt.Errorf("recorded files %q, %q are not this index's", rec.File, rec.IDsFile)
	case rec.Checksum == "" || rec.IDsChecksum == "":
		return l, errors.New("no checksum recorded")
	}
	x, err := vector.LoadFile(filepath.Join(r.dir, rec.File), rec.Checksum, rec.Dim)
	if err != nil {
		return l, err
	}
	fps, err := loadFPs(filepath.Join(r.dir, rec.IDsFile), rec.IDsChecksum)
	if err != nil {
		return l, err
	}
	if x.Len() != rec.Count || len(fps) != rec.Count {
		return l, fmt.Errorf("graph holds %d vectors and the id file %d, record says %d", x.Len(), len(fps), rec.Count)
	}
	a, err := vector.AutoFrom(x, r.cfg.Vector)
	if err != nil {
		return l, err
	}
	l.idx, l.dim, l.fps = a, rec.Dim, fps
	return l, nil
}

// fingerprint identifies a vector's exact content (FNV-1a over its bits).
func fingerprint(v []float32) uint64 {
	h := uint64(14695981039346656037)
	for _, f := range v {
		h ^= uint64(math.Float32bits(f))
		h *= 1099511628211
	}
	return h ^ uint64(len(v))
}

func finite(v []float32) error {
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return errors.New("embedding has a non-finite value")
		}
	}
	return nil
}
