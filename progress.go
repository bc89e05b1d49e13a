package main

import (
	"time"

	"lore/app"
)

// progressPeriod spaces progress events: each emit is a script run in the webview.
const progressPeriod = 100 * time.Millisecond

// follow forwards a workspace's indexing progress to the page as
// progress:<workspace> events {type: "progress"|"done", data}, at most one
// progress event per progressPeriod, errors and the end always.
func (d *App) follow(ws string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx == nil || d.following[ws] {
		return
	}
	events, _, stop, err := d.core.Subscribe(d.ctx, ws)
	if err != nil {
		return
	}
	d.following[ws] = true
	ctx, emit, name := d.ctx, d.emit, "progress:"+ws
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer stop()
		tick := time.NewTicker(progressPeriod)
		defer tick.Stop()
		var pending *app.Progress
		var last time.Time
		send := func(ev app.IndexEvent) {
			emit(name, event{Type: ev.Kind(), Data: ev.Payload()})
			pending, last = nil, time.Now()
		}
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-events:
				if ev.Done != nil || ev.Progress.Error != nil || time.Since(last) >= progressPeriod {
					send(ev)
				} else {
					pending = ev.Progress
				}
			case <-tick.C:
				if pending != nil {
					send(app.IndexEvent{Progress: pending})
				}
			}
		}
	}()
}

// followReadAhead forwards the read-ahead status to the page as prefetch
// events {type: "status", data}: the status at startup, then after every
// change (the app keeps only the latest for a slow reader).
func (d *App) followReadAhead() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx == nil {
		return
	}
	ctx, emit := d.ctx, d.emit
	statuses, stop := d.core.WatchPrefetch(ctx)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer stop()
		for {
			select {
			case <-ctx.Done():
				return
			case st := <-statuses:
				emit("prefetch", event{Type: "status", Data: st})
			}
		}
	}()
}
