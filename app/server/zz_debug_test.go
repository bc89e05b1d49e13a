package server_test

import (
	"context"
	"testing"
	"time"

	"lore/app"
	"lore/app/server"
)

func TestZZDebug(t *testing.T) {
	t0 := time.Now()
	e := newEnv(t, app.Config{}, server.Options{})
	t.Logf("env %v", time.Since(t0))
	e.setMaxTokens(t, 40)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := e.ask(ctx, t, map[string]any{"question": "river market?"})
	t.Logf("err %v status %d", err, res.status)
	for _, ev := range res.events {
		d := string(ev.data)
		if len(d) > 300 { d = d[:300] }
		t.Logf("%8.1f %s %s", ms(ev.at.Sub(res.sent)), ev.name, d)
	}
}
