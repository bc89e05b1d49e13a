package app

import (
	"fmt"
	"strings"
)

// Routes name the chat model that answers a question: the main one or the
// fast one beside it (Settings.FastChatModel). Auto lets the router pick.
const (
	RouteAuto = "auto"
	RouteMain = "main"
	RouteFast = "fast"
)

// checkRoute refuses, before any event, a route that is not one or a fast
// route without a fast model.
func (a *App) checkRoute(route string) error {
	switch route {
	case "", RouteAuto, RouteMain:
		return nil
	case RouteFast:
		if a.current().fast == nil {
			return fmt.Errorf("%w: no fast chat model is set (Settings → Fast chat model, or --fast-model)", ErrInvalid)
		}
		return nil
	}
	return fmt.Errorf("%w: route %q (use auto, main or fast)", ErrInvalid, route)
}

// pickRoute applies the router's rules, in this order, to a question whose
// prompt was assembled for the main model (p):
//  1. a route the request named;
//  2. no fast model: the main one;
//  3. a short question (at most RouteShortWords words) that starts a chat;
//  4. the TTFT budget: the main model's measured reading speed says how
//     long the tokens it has not read yet will take (this turn's passages
//     and the question; none of the passages when a prefetch read them);
//     over RouteTTFTMs, the fast model answers, unless its own measured
//     speed would be no faster.
//
// The reason is written for the user: it is shown beside the answer.
func (a *App) pickRoute(q *question, asked string, p prompt) (role string, g Generator, reason string) {
	main, fast := q.m.chat, q.m.fast
	switch {
	case asked == RouteMain:
		return RouteMain, main, "the main model was asked for"
	case asked == RouteFast && fast != nil:
		return RouteFast, fast, "the fast model was asked for"
	case fast == nil:
		if asked == RouteFast {
			return RouteMain, main, "the fast model was asked for but is no longer set"
		}
		return RouteMain, main, ""
	}
	words := len(strings.Fields(q.text))
	if n := q.s.RouteShortWords; n > 0 && words <= n && len(q.history) == 0 {
		return RouteFast, fast, fmt.Sprintf("a short question (%d words, at most %d go to the fast model)", words, n)
	}
	budget := float64(q.s.RouteTTFTMs)
	if budget <= 0 {
		return RouteMain, main, "no first-token budget set"
	}
	toRead := questionTokens(q.text) + p.turnTokens
	if a.ahead.ready(main.ID(), q.baseKey(main), p.turn[:p.kept]) { // the drafts read the passages it starts with
		toRead = questionTokens(q.text) + p.newTokens
	}
	speed := a.prefillSpeed(main)
	if speed <= 0 {
		return RouteMain, main, "the main model's reading speed is not measured yet"
	}
	est := float64(toRead) / speed * 1000
	if est <= budget {
		return RouteMain, main, fmt.Sprintf("the main model reads the %d new tokens in ~%.0f ms, within the %.0f ms budget", toRead, est, budget)
	}
	if fs := a.prefillSpeed(fast); fs > 0 && fs <= speed {
		return RouteMain, main, fmt.Sprintf("over the %.0f ms budget (~%.0f ms), but the fast model reads no faster (%.0f vs %.0f tokens/s)", budget, est, fs, speed)
	}
	return RouteFast, fast, fmt.Sprintf("the main model would take ~%.0f ms to read the %d new tokens, over the %.0f ms first-token budget", est, toRead, budget)
}

// questionTokens estimates the tokens of the question and the template's
// tail around it (about four characters a token).
func questionTokens(q string) int { return len(q)/4 + 16 }
