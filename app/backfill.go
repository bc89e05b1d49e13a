package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"lore/index/retrieve"
	"lore/store"
)

// backfillPassages stores the passages of the questions asked before
// questions kept them, read back from their traces: a follow-up in an old
// chat then lays its earlier turns out as they were sent, and no question
// reads traces on its way. A question whose trace is gone gets none (and is
// not looked at again); one that fails is left for the next start, and the
// rest go on.
func (a *App) backfillPassages(ctx context.Context) error {
	qs, err := a.db.QuestionsWithoutPassages(ctx)
	if err != nil {
		return err
	}
	var failed []error
	for _, q := range qs {
		ps, err := a.turnPassages(ctx, q.RequestID)
		var b []byte
		if err == nil {
			b, err = json.Marshal(toSources(ps))
		}
		if err == nil {
			err = a.db.SetPassages(ctx, q.ID, b)
		}
		if err != nil {
			failed = append(failed, fmt.Errorf("request %s: %w", q.RequestID, err))
		}
	}
	return errors.Join(failed...)
}

// turnPassages are the passages a question's prompt placed in its own
// turn, read back from its trace (the cut one cut again). A chunk gone
// since (re-indexed) is left out: the cache is then reused only up to it.
func (a *App) turnPassages(ctx context.Context, requestID string) ([]retrieve.Passage, error) {
	t, err := a.Trace(ctx, requestID)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil // the trace was deleted: nothing to lay out
	case err != nil:
		return nil, err
	}
	hits, err := a.db.ChunkTexts(ctx, t.TurnPassages)
	if err != nil {
		return nil, err
	}
	byID := map[int64]store.Hit{}
	for _, h := range hits {
		byID[h.ChunkID] = h
	}
	var out []retrieve.Passage
	for _, id := range t.TurnPassages {
		if h, ok := byID[id]; ok {
			if c := t.Cut; c != nil && c.ChunkID == id {
				h.Text = c.apply(h.Text)
			}
			out = append(out, retrieve.Passage{ChunkID: h.ChunkID, DocID: h.DocumentID, Path: h.Path, Rel: h.Rel, Heading: h.Heading,
				Page: h.Page, LineStart: h.LineStart, LineEnd: h.LineEnd, Text: h.Text})
		}
	}
	return out, nil
}
