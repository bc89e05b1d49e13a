package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"lore/store"
)

// Embed embeds the workspace's chunks that have no vector from the Indexer's Embedder,
// one batch at a time, checking ctx between batches. It returns how many it embedded.
// Run calls it after parsing; call it alone to embed later or after a model change.
func (ix *Indexer) Embed(ctx context.Context, workspace string, opt Options) (int, error) {
	if ix.Embedder == nil {
		return 0, errors.New("ingest: no embedder")
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	r, err := ix.newRun(ctx, workspace, nil, opt)
	if err != nil {
		return 0, err
	}
	return ix.embed(ctx, r.ws.ID, r.opt, r.emit)
}

func (ix *Indexer) embed(ctx context.Context, ws int64, opt Options, emit func(Progress, bool)) (int, error) {
	model := ix.Embedder.ModelID()
	if model == "" {
		return 0, errors.New("ingest: embedder has an empty model id")
	}
	counts, err := ix.DB.Counts(ctx, ws, model)
	if err != nil {
		return 0, fmt.Errorf("ingest: %w", err)
	}
	total := counts.Chunks - counts.Embedded
	// Every file is parsed by now: embed events carry the file count too, so a
	// progress line never reads "0 files" while passages are embedded.
	files := counts.Documents[store.StatusIndexed]
	emit(Progress{Phase: PhaseEmbed, FilesDone: files, FilesTotal: files, ChunksTotal: total}, true)
	start := time.Now()
	done := 0
	var after int64
	for {
		if err := ctx.Err(); err != nil {
			return done, err
		}
		batch, err := ix.DB.ChunksMissingEmbedding(ctx, ws, model, after, opt.EmbedBatch)
		if err != nil {
			return done, fmt.Errorf("ingest: %w", err)
		}
		if len(batch) == 0 {
			return done, nil
		}
		texts := make([]string, len(batch))
		for i, c := range batch {
			texts[i] = c.Text
		}
		vecs, err := ix.Embedder.Embed(ctx, texts)
		if err != nil {
			if ctx.Err() != nil {
				return done, ctx.Err()
			}
			return done, fmt.Errorf("ingest: embed with %s: %w", model, err)
		}
		if len(vecs) != len(batch) {
			return done, fmt.Errorf("ingest: embed with %s: %d vectors for %d passages", model, len(vecs), len(batch))
		}
		embs := make([]store.Embedding, len(batch))
		for i, c := range batch {
			embs[i] = store.Embedding{ChunkID: c.ID, Vec: vecs[i], Text: c.Text}
		}
		if err := ix.DB.PutEmbeddings(ctx, model, embs); err != nil {
			return done, fmt.Errorf("ingest: %w", err)
		}
		done += len(batch)
		after = batch[len(batch)-1].ID
		p := Progress{Phase: PhaseEmbed, FilesDone: files, FilesTotal: files, Chunks: done, ChunksTotal: max(total, done)}
		if el := time.Since(start); el > 0 {
			rate := float64(done) / el.Seconds()
			p.ETA = time.Duration(float64(max(total-done, 0)) / rate * float64(time.Second))
		}
		emit(p, done >= total) // the last one always goes out
	}
}
