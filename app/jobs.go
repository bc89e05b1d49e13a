package app

import (
	"context"
	"fmt"
	"os"
	"sync"

	"lore/engine"
	"lore/index/ingest"
	"lore/index/parse"
	"lore/store"
)

// jobs runs the indexing of each workspace: one goroutine per workspace
// takes every run, whoever asks (the CLI, a front door, the file watcher),
// so runs of one workspace never overlap, and a run's "done" goes out only
// after its summary is stored.
type jobs struct {
	a      *App
	parser *parse.Parser
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex // guards ws and every job's state
	ws map[int64]*job
}

// job is one workspace's runner.
type job struct {
	j    *jobs
	ws   store.Workspace
	wake chan struct{} // a background run is due (coalesces)
	reqs chan *jobReq  // runs someone waits for

	running   bool
	last      Summary
	subs      map[chan IndexEvent]struct{}
	stopWatch context.CancelFunc

	ctx    context.Context // ends when the app closes or the workspace goes (forget)
	cancel context.CancelFunc
	exited chan struct{} // closed when loop returns
}

type jobReq struct {
	ctx      context.Context
	folders  []string
	progress func(Progress)
	done     chan jobResult
}

type jobResult struct {
	sum Summary
	err error
}

func newJobs(a *App) *jobs {
	workerCmd := a.cfg.WorkerCmd
	if workerCmd == nil {
		if exe, err := os.Executable(); err == nil {
			workerCmd = []string{exe, parse.WorkerArg}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &jobs{a: a, parser: parse.New(parse.Options{WorkerCmd: workerCmd}), ctx: ctx, cancel: cancel, ws: map[int64]*job{}}
}

// get returns the workspace's runner, starting it on first use.
func (j *jobs) get(ws store.Workspace) *job {
	j.mu.Lock()
	defer j.mu.Unlock()
	if x := j.ws[ws.ID]; x != nil {
		return x
	}
	x := &job{j: j, ws: ws, wake: make(chan struct{}, 1), reqs: make(chan *jobReq), subs: map[chan IndexEvent]struct{}{},
		exited: make(chan struct{})}
	x.ctx, x.cancel = context.WithCancel(j.ctx)
	j.ws[ws.ID] = x
	j.wg.Add(1)
	go x.loop()
	return x
}

func (j *jobs) stop() {
	j.cancel()
	j.wg.Wait()
}

// rename follows a workspace's new name: later runs index under it.
func (j *jobs) rename(ws int64, name string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if x := j.ws[ws]; x != nil {
		x.ws.Name = name
	}
}

// forget stops the workspace's runner for good (a run going on is
// cancelled, its watcher stopped) and waits until it has, or ctx ends:
// the workspace is about to be deleted, and a run must not recreate it.
func (j *jobs) forget(ctx context.Context, ws int64) error {
	j.mu.Lock()
	x := j.ws[ws]
	delete(j.ws, ws)
	j.mu.Unlock()
	if x == nil {
		return nil
	}
	x.cancel()
	select {
	case <-x.exited:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (x *job) loop() {
	defer x.j.wg.Done()
	defer close(x.exited)
	for {
		select {
		case <-x.ctx.Done():
			return
		case r := <-x.reqs:
			sum, err := x.run(r.ctx, r.folders, r.progress)
			r.done <- jobResult{sum, err}
		case <-x.wake:
			x.run(x.ctx, nil, nil)
		}
	}
}

// request asks for a background run of all the workspace's folders.
func (x *job) request() {
	select {
	case x.wake <- struct{}{}:
	default: // one is due already; it will see the latest state
	}
}

// do runs folders (none: all) now and waits for the outcome; ctx cancels it.
func (x *job) do(ctx context.Context, folders []string, progress func(Progress)) (Summary, error) {
	r := &jobReq{ctx: ctx, folders: folders, progress: progress, done: make(chan jobResult, 1)}
	select {
	case x.reqs <- r:
	case <-ctx.Done():
		return Summary{}, ctx.Err()
	case <-x.ctx.Done():
		return Summary{}, context.Canceled
	}
	res := <-r.done
	return res.sum, res.err
}

// run indexes with the models current when it starts and brings the
// vector index up to date.
func (x *job) run(ctx context.Context, folders []string, progress func(Progress)) (Summary, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(x.ctx, cancel) // the app closing, or the workspace going, stops it too
	defer stop()
	a := x.j.a
	m, let := a.hold()
	defer let()
	ix := &ingest.Indexer{DB: a.db, Parser: x.j.parser}
	if m.embed != nil {
		ix.Embedder = embedAdapter{m.embed}
	}
	x.j.mu.Lock()
	x.running = true
	name := x.ws.Name // renames change it
	x.j.mu.Unlock()

	var files int // the parse phase's total, carried into the embed phase's events
	sum, err := ix.Run(ctx, name, folders, ingest.Options{Progress: func(p ingest.Progress) {
		if p.Phase == ingest.PhaseParse {
			files = p.FilesTotal
		} else if p.Phase == ingest.PhaseEmbed && p.FilesTotal == 0 {
			p.FilesDone, p.FilesTotal = files, files
		}
		v := progressOf(p)
		if progress != nil {
			progress(v)
		}
		x.publish(IndexEvent{Progress: &v})
	}})
	if rerr := m.retriever.Refresh(context.WithoutCancel(ctx), x.ws.ID); rerr != nil && err == nil {
		err = fmt.Errorf("vector index: %w", rerr)
	}
	if err != nil {
		a.log.Warn("indexing", "workspace", name, "err", err)
	}
	s := summaryOf(sum)
	x.j.mu.Lock()
	x.running, x.last = false, s
	x.j.mu.Unlock()
	x.publish(IndexEvent{Done: &s})
	return s, err
}

// publish sends ev to every subscriber without blocking indexing: a slow
// subscriber misses progress steps, never the end of a run.
func (x *job) publish(ev IndexEvent) {
	x.j.mu.Lock()
	defer x.j.mu.Unlock()
	for ch := range x.subs {
		select {
		case ch <- ev:
			continue
		default:
		}
		if ev.Done == nil {
			continue
		}
		select { // make room for the end: drop the oldest step
		case <-ch:
		default:
		}
		select {
		case ch <- ev:
		default:
		}
	}
}

// watch keeps the workspace current: a file watcher asks for a run after
// each burst of changes. Called again, it restarts with the current folders.
func (x *job) watch() {
	a := x.j.a
	folders, err := a.db.Folders(x.ctx, x.ws.ID)
	if err != nil {
		a.log.Warn("watch", "workspace_id", x.ws.ID, "err", err)
		return
	}
	roots := make([]string, len(folders))
	for i, f := range folders {
		roots[i] = f.Path
	}
	ctx, cancel := context.WithCancel(x.ctx)
	x.j.mu.Lock()
	if x.stopWatch != nil {
		x.stopWatch()
	}
	x.stopWatch = cancel
	x.j.mu.Unlock()
	x.j.wg.Add(1)
	go func() {
		defer x.j.wg.Done()
		err := ingest.WatchChanges(ctx, roots, ingest.Options{Progress: func(p ingest.Progress) {
			if p.Err != nil { // a folder not watched: changes there wait for the next run
				a.log.Warn("watch", "workspace_id", x.ws.ID, "path", p.Err.Path, "err", p.Err.Reason)
			}
			v := progressOf(p)
			x.publish(IndexEvent{Progress: &v})
		}}, x.request)
		if err != nil {
			a.log.Warn("watch", "workspace_id", x.ws.ID, "err", err)
		}
	}()
	x.request() // catch up with what changed while no one watched
}

// embedAdapter runs indexing embeddings at background priority, so a
// question's query embedding goes first; it yields between batches.
type embedAdapter struct{ e Embedder }

func (b embedAdapter) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return b.e.Embed(engine.WithPriority(ctx, engine.Background), texts)
}
func (b embedAdapter) ModelID() string { return b.e.ID() }

// IndexEvent is a step of a workspace's indexing: progress, or the end of
// a run with its stored summary.
type IndexEvent struct {
	Progress *Progress
	Done     *Summary
}

// Kind is the event's name on the wire: "progress" or "done".
func (e IndexEvent) Kind() string {
	if e.Done != nil {
		return "done"
	}
	return "progress"
}

// Payload is the event's JSON body.
func (e IndexEvent) Payload() any {
	if e.Done != nil {
		return *e.Done
	}
	return *e.Progress
}

// IndexState says whether a workspace is being indexed and how its last
// run ended.
type IndexState struct {
	Running bool    `json:"running"`
	Last    Summary `json:"last"`
}

// Subscribe follows a workspace's indexing: the events of runs from now
// on, the state at the moment of subscribing, and a func to stop.
func (a *App) Subscribe(ctx context.Context, workspace string) (<-chan IndexEvent, IndexState, func(), error) {
	ws, err := a.lookup(ctx, workspace)
	if err != nil {
		return nil, IndexState{}, nil, err
	}
	x := a.jobs.get(ws)
	ch := make(chan IndexEvent, 64)
	a.jobs.mu.Lock()
	x.subs[ch] = struct{}{}
	now := IndexState{Running: x.running, Last: x.last}
	a.jobs.mu.Unlock()
	return ch, now, func() {
		a.jobs.mu.Lock()
		delete(x.subs, ch)
		a.jobs.mu.Unlock()
	}, nil
}

// IndexStatus is a workspace's indexing state.
func (a *App) IndexStatus(ctx context.Context, workspace string) (IndexState, error) {
	ws, err := a.lookup(ctx, workspace)
	if err != nil {
		return IndexState{}, err
	}
	return a.jobs.state(ws.ID), nil
}

func (j *jobs) state(ws int64) IndexState {
	j.mu.Lock()
	defer j.mu.Unlock()
	if x := j.ws[ws]; x != nil {
		return IndexState{Running: x.running, Last: x.last}
	}
	return IndexState{}
}

// MaybeServeWorker turns this process into a parse worker when args say
// it is one (the app starts them as children of its own executable), and
// returns otherwise. Every main package calls it first.
func MaybeServeWorker(args []string) { parse.MaybeServeWorker(args) }
