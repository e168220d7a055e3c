#!/bin/sh
# spawn.sh PIDFILE MODE: a tool that starts a family of processes in its
# process group and records every pid in PIDFILE, one a line (6 in all).
# Then, by MODE, it hangs until killed ("hang") or prints "done" and exits
# at once, leaving the family running ("exit").
pidfile=$1
echo $$ >>"$pidfile"                                             # the tool
sleep 301 &                                                      # a child holding stdout and stderr
echo $! >>"$pidfile"
sleep 302 </dev/null >/dev/null 2>&1 &                           # a child holding nothing
echo $! >>"$pidfile"
(sleep 303 </dev/null >/dev/null 2>&1 & echo $! >>"$pidfile")    # an orphan: its parent has exited
(sleep 304 & echo $! >>"$pidfile"; wait) &                       # a grandchild under a living subshell
echo $! >>"$pidfile"
while [ "$(wc -l <"$pidfile")" -lt 6 ]; do sleep 0.01; done
case $2 in
hang) wait ;;
exit) echo done ;;
esac
