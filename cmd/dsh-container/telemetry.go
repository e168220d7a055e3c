package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/spf13/pflag"

	"github.com/dsh-container/dsh-container/registry"
	"github.com/dsh-container/dsh-container/telemetry"
)

// traceOptions are the tracing flags of run, serve and mcp.
type traceOptions struct {
	Endpoint string
	Payloads bool
}

func addTraceFlags(fl *pflag.FlagSet, o *traceOptions) {
	fl.StringVar(&o.Endpoint, "otlp-endpoint", "", "export OpenTelemetry traces over OTLP/HTTP to this collector (http://HOST:4318; /v1/traces is appended); default: the OTEL_EXPORTER_OTLP_* and OTEL_SERVICE_NAME variables; tracing is off when neither is set")
	fl.BoolVar(&o.Payloads, "trace-payloads", false, "put tool-call arguments and results on their spans (default: their sizes only; they may hold secrets)")
}

// setupTracing validates the flags and installs the tracer provider; the
// caller defers shutdownTracing. idsWhenOff gives every run a trace id
// for the logs even with tracing off (serve, mcp).
func setupTracing(ctx context.Context, o *traceOptions, log *slog.Logger, idsWhenOff bool) (*telemetry.Provider, error) {
	if o.Endpoint != "" {
		if _, err := telemetry.TracesURL(o.Endpoint); err != nil {
			return nil, usageError{err}
		}
	}
	p, err := telemetry.Setup(ctx, telemetry.Options{Endpoint: o.Endpoint, Version: Version, IDsWhenOff: idsWhenOff, Logger: log})
	if err != nil {
		return nil, usageError{err}
	}
	return p, nil
}

// shutdownTracing flushes the spans not yet exported.
func shutdownTracing(ctx context.Context, p *telemetry.Provider, log *slog.Logger) {
	if err := p.Shutdown(ctx); err != nil {
		log.Warn("exporting traces", "err", err)
	}
}

// traceRegistryOptions are the registry options the flags imply.
func (o *traceOptions) registryOptions() []registry.Option {
	if !o.Payloads {
		return nil
	}
	return []registry.Option{registry.WithTracePayloads(true)}
}

// withEnvTraceparent joins the CLI's run to the trace in TRACEPARENT
// (and TRACESTATE), as OpenTelemetry's environment carriers do.
func withEnvTraceparent(ctx context.Context) context.Context {
	ctx, _ = telemetry.WithTraceparent(ctx, os.Getenv("TRACEPARENT"), os.Getenv("TRACESTATE"))
	return ctx
}
