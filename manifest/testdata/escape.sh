#!/bin/sh
# escape.sh PIDFILE: a tool that starts a process in a new session — out of
# its process group — holding its stdout, records that process's pid in
# PIDFILE once it has left the group, and exits.
setsid /bin/sh -c 'echo $$ >"$1"; exec sleep 306' sh "$1" &
while [ ! -s "$1" ]; do sleep 0.01; done
echo started
