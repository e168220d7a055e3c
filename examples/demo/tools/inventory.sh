#!/bin/sh
# Demo tool: prints the fleet as JSON. Arguments arrive as JSON on stdin.
cat >/dev/null
cat <<'JSON'
[{"name":"api-1","region":"eu","role":"api"},
 {"name":"api-2","region":"us","role":"api"},
 {"name":"db-1","region":"eu","role":"db"},
 {"name":"db-2","region":"us","role":"db"},
 {"name":"cache-1","region":"eu","role":"cache"}]
JSON
