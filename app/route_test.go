package app_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"lore/app"
)

// TestRouting: with a fast chat model beside the main one, each rule of
// the router picks the model it says, the trace records the route and the
// reason, each route answers from its own warm system prefix, and the
// percentiles split by route. A route that is not one, or the fast route
// without a fast model, is refused before any event.
func TestRouting(t *testing.T) {
	ctx := context.Background()
	askRoute := func(t *testing.T, a *app.App, q, route string) (*app.Trace, string, error) {
		t.Helper()
		var answer strings.Builder
		tr, err := a.Ask(ctx, app.AskRequest{Question: q, Route: route}, func(ev app.Event) error {
			if tok, ok := ev.(app.Token); ok {
				answer.WriteString(tok.Text)
			}
			return nil
		})
		return tr, answer.String(), err
	}

	t.Run("refused", func(t *testing.T) {
		a := newApp(t, opts{chat: true})
		for _, route := range []string{"fast", "quick"} {
			events := 0
			_, err := a.Ask(ctx, app.AskRequest{Question: "when does the river market open", Route: route}, func(app.Event) error { events++; return nil })
			if !errors.Is(err, app.ErrInvalid) || events != 0 {
				t.Errorf("route %q without a fast model: err %v after %d events, want ErrInvalid before any", route, err, events)
			}
		}
		tr, _, err := askRoute(t, a, "when does the river market open", "")
		if err != nil || tr.RouteRole != app.RouteMain || tr.RouteReason != "" {
			t.Errorf("one chat model: role %q reason %q err %v, want main without a reason", tr.RouteRole, tr.RouteReason, err)
		}
	})

	a := newApp(t, opts{chat: true, fast: true})
	set := func(f func(*app.Settings)) {
		t.Helper()
		s := a.Settings()
		f(&s)
		if err := a.SaveSettings(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	isFast := func(tr *app.Trace) bool { return strings.Contains(tr.Route, "fast") }
	tests := []struct {
		name     string
		route    string
		settings func(*app.Settings)
		q        string
		role     string // "" where the measured speeds decide (checked for consistency)
		reason   string
	}{
		{"asked for main", app.RouteMain, func(s *app.Settings) { s.RouteShortWords = 20 }, "river market", app.RouteMain, "main model was asked for"},
		{"asked for fast", app.RouteFast, func(s *app.Settings) { s.RouteShortWords = 0 }, "when does the river market open", app.RouteFast, "fast model was asked for"},
		{"short question", "", func(s *app.Settings) { s.RouteShortWords = 3 }, "river market hours", app.RouteFast, "short question (3 words"},
		{"long question", "", func(s *app.Settings) { s.RouteShortWords = 3; s.RouteTTFTMs = 600_000 }, "when does the river market open", app.RouteMain, "within the 600000 ms budget"},
		{"no budget", "", func(s *app.Settings) { s.RouteTTFTMs = 0 }, "what grows in the garden", app.RouteMain, "no first-token budget"},
		{"over budget", "", func(s *app.Settings) { s.RouteShortWords = 0; s.RouteTTFTMs = 1 }, "what did the students write about energy", "", "budget"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			set(tc.settings)
			tr, answer, err := askRoute(t, a, tc.q, tc.route)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("route %s (%s): %s; %d prompt tokens, %d cached", tr.Route, tr.RouteRole, tr.RouteReason, tr.PromptTokens, tr.CachedTokens)
			role := tc.role
			if role == "" { // the fast model answers unless it measured no faster
				role = app.RouteFast
				if strings.Contains(tr.RouteReason, "reads no faster") {
					role = app.RouteMain
				}
			}
			if tr.RouteRole != role || isFast(tr) != (role == app.RouteFast) || !strings.Contains(tr.RouteReason, tc.reason) {
				t.Errorf("route %s (%s), reason %q: want %s, reason with %q", tr.Route, tr.RouteRole, tr.RouteReason, role, tc.reason)
			}
			if strings.TrimSpace(answer) == "" || tr.PromptTokens == 0 {
				t.Errorf("answer %q, %d prompt tokens: want an answer from the routed model", answer, tr.PromptTokens)
			}
			// Its own system prefix, read at start: at least that is cached.
			if tr.CachedTokens < 20 {
				t.Errorf("%d cached tokens: want the route's warm system prefix reused", tr.CachedTokens)
			}
		})
	}

	st, err := a.Stats(ctx, "all")
	if err != nil {
		t.Fatal(err)
	}
	if st.ByRoute[app.RouteMain].N < 3 || st.ByRoute[app.RouteFast].N < 2 {
		t.Errorf("by route %+v: want main ≥ 3 and fast ≥ 2 answers", st.ByRoute)
	}
}
