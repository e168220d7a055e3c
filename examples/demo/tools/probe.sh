#!/bin/sh
# Demo tool: "probes" a host. Reads {"host": "..."} on stdin; the figures
# are fixed so the demo is reproducible (no network is touched).
host=$(sed -n 's/.*"host"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p')
case "$host" in
  api-1)   echo '{"host":"api-1","latency_ms":12,"healthy":true}' ;;
  api-2)   echo '{"host":"api-2","latency_ms":240,"healthy":true}' ;;
  db-1)    echo '{"host":"db-1","latency_ms":8,"healthy":true}' ;;
  db-2)    echo '{"host":"db-2","latency_ms":0,"healthy":false}' ;;
  cache-1) echo '{"host":"cache-1","latency_ms":3,"healthy":true}' ;;
  *)       echo "unknown host: $host" >&2; exit 1 ;;
esac
