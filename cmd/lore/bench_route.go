package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"lore/app"
	"lore/engine/synth"
)

// routeReport is TTFT per route on the same questions (`lore bench ttft
// --route`): each question asked cold of the main model, then of the fast
// one (each model's own cache holds only its system prefix and the
// previous question), and the share the router's own rules send to the
// fast model.
type routeReport struct {
	FastModel   string   `json:"fast_model"`
	MainP50     float64  `json:"route_main_p50_ms"`
	MainP95     float64  `json:"route_main_p95_ms"`
	FastP50     float64  `json:"route_fast_p50_ms"`
	FastP95     float64  `json:"route_fast_p95_ms"`
	MainEvalP50 float64  `json:"route_main_eval_tokens_p50"`
	FastEvalP50 float64  `json:"route_fast_eval_tokens_p50"`
	AutoFast    float64  `json:"route_auto_fast_share"` // of the questions, under the default rules
	AutoReasons []string `json:"route_auto_reasons"`
}

// fastModelFor returns the fast chat model to route to: path, or a
// synthetic one of shape under dir.
func fastModelFor(path, shape, dir string) (string, error) {
	if path != "" {
		return path, nil
	}
	out := filepath.Join(dir, "synth-fast-"+shape+".gguf")
	if _, err := os.Stat(out); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "synthesising %s (the fast route's model)…\n", filepath.Base(out))
		if err := synth.Write(out, synth.Options{Shape: shape, Seed: 4}); err != nil {
			return "", err
		}
	}
	return out, nil
}

func benchRoutes(qs []string, fast string, ask func(q, route string) (*app.Trace, error), logf func(string, ...any)) (*routeReport, error) {
	rep := &routeReport{FastModel: filepath.Base(fast)}
	var main, fastT, mainEval, fastEval []float64
	autoFast := 0
	for i, q := range qs {
		m, err := ask(q, app.RouteMain)
		if err != nil {
			return nil, err
		}
		f, err := ask(q, app.RouteFast)
		if err != nil {
			return nil, err
		}
		// Asked a third time: its TTFT is not cold, but the router's pick is.
		auto, err := ask(q, app.RouteAuto)
		if err != nil {
			return nil, err
		}
		main, fastT = append(main, m.Stages[app.StageTTFT]), append(fastT, f.Stages[app.StageTTFT])
		mainEval, fastEval = append(mainEval, float64(m.EvalTokens)), append(fastEval, float64(f.EvalTokens))
		if auto.RouteRole == app.RouteFast {
			autoFast++
		}
		rep.AutoReasons = append(rep.AutoReasons, auto.RouteRole+": "+auto.RouteReason)
		logf("route %2d/%d: main %6.0f ms (%d evaluated), fast %6.0f ms (%d evaluated); auto → %s: %s", i+1, len(qs),
			m.Stages[app.StageTTFT], m.EvalTokens, f.Stages[app.StageTTFT], f.EvalTokens, auto.RouteRole, auto.RouteReason)
	}
	rep.MainP50, rep.MainP95 = pctOf(sorted(main), 0.5), pctOf(sorted(main), 0.95)
	rep.FastP50, rep.FastP95 = pctOf(sorted(fastT), 0.5), pctOf(sorted(fastT), 0.95)
	rep.MainEvalP50, rep.FastEvalP50 = pctOf(sorted(mainEval), 0.5), pctOf(sorted(fastEval), 0.5)
	rep.AutoFast = round2(float64(autoFast) / float64(max(len(qs), 1)))
	return rep, nil
}

func (r *routeReport) print() {
	fmt.Printf("  route main p50 %6.0f ms  p95 %6.0f ms  (%d evaluated, median)\n", r.MainP50, r.MainP95, int(r.MainEvalP50))
	fmt.Printf("  route fast p50 %6.0f ms  p95 %6.0f ms  (%d evaluated; %s); the router sent %.0f%% to it\n", r.FastP50, r.FastP95, int(r.FastEvalP50), r.FastModel, 100*r.AutoFast)
}
