// Package telemetry sets up the process's tracing and metrics for the
// front doors: spans over OTLP when configured, stage histograms for
// /metrics. The app service itself only takes a tracer and a callback.
package telemetry

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"lore/app"
)

// Telemetry is the process's tracing and metrics.
type Telemetry struct {
	Tracer   trace.Tracer
	Metrics  http.Handler     // Prometheus text format
	OnTrace  func(*app.Trace) // records a finished trace's stages as histograms
	shutdown []func(context.Context) error
}

// New exports spans over OTLP/HTTP when the standard
// OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT) variable is set, and
// keeps per-stage latency histograms for /metrics.
func New(ctx context.Context) (*Telemetry, error) {
	t := &Telemetry{Tracer: noop.NewTracerProvider().Tracer("lore")}
	res := resource.NewSchemaless(attribute.String("service.name", "lore"))
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" {
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("otlp exporter: %w", err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		t.Tracer = tp.Tracer("lore")
		t.shutdown = append(t.shutdown, tp.Shutdown)
	}
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res))
	t.shutdown = append(t.shutdown, mp.Shutdown)
	hist, err := mp.Meter("lore").Float64Histogram("lore.stage.duration",
		metric.WithUnit("ms"), metric.WithDescription("Time spent in each stage of answering a question"),
		metric.WithExplicitBucketBoundaries(1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000))
	if err != nil {
		return nil, err
	}
	// Speculation, per route: the acceptance over the route's recent
	// answers, and the tokens drafted and kept.
	rate, err := mp.Meter("lore").Float64Gauge("lore.draft_accept_rate",
		metric.WithDescription("Share of speculative draft tokens the chat model kept, over the route's recent answers"))
	if err != nil {
		return nil, err
	}
	drafts, err := mp.Meter("lore").Int64Counter("lore.draft.tokens",
		metric.WithDescription("Speculative draft tokens, by state: drafted or accepted"))
	if err != nil {
		return nil, err
	}
	t.Metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	t.OnTrace = func(tr *app.Trace) {
		ctx := context.Background()
		for name, ms := range tr.Stages {
			hist.Record(ctx, ms, metric.WithAttributes(
				attribute.String("stage", strings.TrimSuffix(name, "_ms")), attribute.Int("fallback_level", int(tr.FallbackLevel))))
		}
		route := attribute.String("route", cmp.Or(tr.RouteRole, "main"))
		if tr.DraftAcceptRate != nil {
			rate.Record(ctx, *tr.DraftAcceptRate, metric.WithAttributes(route))
		}
		if tr.Drafted > 0 {
			drafts.Add(ctx, int64(tr.Drafted), metric.WithAttributes(route, attribute.String("state", "drafted")))
			drafts.Add(ctx, int64(tr.Accepted), metric.WithAttributes(route, attribute.String("state", "accepted")))
		}
	}
	return t, nil
}

// Shutdown flushes exporters.
func (t *Telemetry) Shutdown(ctx context.Context) {
	for _, f := range t.shutdown {
		f(ctx)
	}
}
