// Package telemetry turns tracing on for the CLI's commands: an
// OpenTelemetry SDK TracerProvider exporting over OTLP/HTTP, configured by
// the standard OTEL_EXPORTER_OTLP_* and OTEL_SERVICE_NAME variables or an
// explicit endpoint, installed as the global provider that the runtime
// (backend/container) and the registry start their spans on. With neither
// set, tracing is off: no exporter and, by default, the API's no-op
// tracer. It also parses W3C trace context given to a surface (a
// traceparent string) and builds the JSON logger whose run lines carry
// run_id and trace_id.
package telemetry
