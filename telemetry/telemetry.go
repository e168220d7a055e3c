package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ServiceName is the service.name of the exported spans unless
// OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) names another.
const ServiceName = "dsh-container"

// TracesPath is the OTLP/HTTP path of traces under a base endpoint.
const TracesPath = "/v1/traces"

// Options configure Setup.
type Options struct {
	// Endpoint is the OTLP/HTTP collector's base URL (http://host:4318;
	// TracesPath is appended unless the URL ends in it). Empty: the
	// OTEL_EXPORTER_OTLP_* variables decide.
	Endpoint string
	// Version is the service.version.
	Version string
	// IDsWhenOff, with tracing off, installs a provider that samples
	// nothing but still gives every run its own trace id (for log lines);
	// otherwise tracing off leaves the API's no-op provider in place.
	IDsWhenOff bool
	// Getenv reads the environment (default os.Getenv); tests override it.
	Getenv func(string) string
	// Environ lists the environment (default os.Environ).
	Environ func() []string
	// Logger receives export errors (default: discarded), instead of the
	// SDK's own unstructured line on stderr.
	Logger *slog.Logger
}

// Provider is the tracing Setup installed.
type Provider struct {
	// Enabled reports that spans are exported.
	Enabled bool
	// Endpoint is where they go (when Enabled and known).
	Endpoint string
	tp       *sdktrace.TracerProvider
	prev     trace.TracerProvider
}

// Enabled reports whether tracing is configured: an endpoint, or any
// OTEL_EXPORTER_OTLP_* or OTEL_SERVICE_NAME variable, unless
// OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none.
func Enabled(endpoint string, getenv func(string) string, environ func() []string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	if environ == nil {
		environ = os.Environ
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") ||
		strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none") {
		return false
	}
	if endpoint != "" || getenv("OTEL_SERVICE_NAME") != "" {
		return true
	}
	for _, kv := range environ() {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "OTEL_EXPORTER_OTLP_") && v != "" {
			return true
		}
	}
	return false
}

// TracesURL validates an --otlp-endpoint value and returns the URL traces
// are posted to. A bare host:port means http://host:port.
func TracesURL(endpoint string) (string, error) {
	e := strings.TrimSpace(endpoint)
	if !strings.Contains(e, "://") {
		e = "http://" + e
	}
	u, err := url.Parse(e)
	if err != nil {
		return "", fmt.Errorf("--otlp-endpoint %q: %v", endpoint, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("--otlp-endpoint %q: scheme must be http or https (OTLP/HTTP)", endpoint)
	}
	if u.Host == "" {
		return "", fmt.Errorf("--otlp-endpoint %q: no host (want http://HOST:PORT)", endpoint)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("--otlp-endpoint %q: want http(s)://HOST:PORT[/path] without user, query or fragment", endpoint)
	}
	if !strings.HasSuffix(u.Path, TracesPath) {
		u.Path = strings.TrimSuffix(u.Path, "/") + TracesPath
	}
	return u.String(), nil
}

// Setup installs the global TracerProvider and the W3C propagators. Call
// Shutdown at exit: it flushes the spans not yet exported.
func Setup(ctx context.Context, o Options) (*Provider, error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	p := &Provider{prev: otel.GetTracerProvider()}
	if !Enabled(o.Endpoint, o.Getenv, o.Environ) {
		if o.IDsWhenOff {
			p.tp = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
			otel.SetTracerProvider(p.tp)
		}
		return p, nil
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto != "" && proto != "http/protobuf" && proto != "http/json" {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: dsh-container exports OTLP over HTTP only: use http/protobuf (the collector's port 4318)", proto)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("exporting traces", "err", err) }))
	var eopts []otlptracehttp.Option
	if o.Endpoint != "" {
		u, err := TracesURL(o.Endpoint)
		if err != nil {
			return nil, err
		}
		eopts = append(eopts, otlptracehttp.WithEndpointURL(u))
		p.Endpoint = u
	}
	exp, err := otlptracehttp.New(ctx, eopts...)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", ServiceName), attribute.String("service.version", o.Version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil && res == nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	p.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	p.Enabled = true
	otel.SetTracerProvider(p.tp)
	return p, nil
}

// Shutdown flushes and stops the provider, within ctx or 10 seconds,
// and puts the previous global provider back. Nil-safe, idempotent.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil || p.tp == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	tp := p.tp
	p.tp = nil
	otel.SetTracerProvider(p.prev)
	err := tp.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("flushing traces: %w", err)
	}
	return err
}

// WithTraceparent returns ctx joined to the W3C trace context in
// traceparent (and tracestate): the spans started under it belong to
// that trace. An empty or malformed traceparent leaves ctx as it is
// (W3C: a receiver ignores an invalid header), reported by ok.
func WithTraceparent(ctx context.Context, traceparent, tracestate string) (_ context.Context, ok bool) {
	if traceparent == "" {
		return ctx, false
	}
	c := propagation.MapCarrier{"traceparent": traceparent}
	if tracestate != "" {
		c["tracestate"] = tracestate
	}
	out := propagation.TraceContext{}.Extract(ctx, c)
	if !trace.SpanContextFromContext(out).IsValid() {
		return ctx, false
	}
	return out, true
}
