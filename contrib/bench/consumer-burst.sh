#!/bin/bash
# The live consumer under a netlink burst, two tracer binaries side by side (BENCHMARKS.md,
# 2026-11-25 "consumer split from the ring").
#
#   [MODES='json pcap text'] contrib/bench/consumer-burst.sh BEFORE_BIN AFTER_BIN [ROUNDS] [PAIRS]
#
# As root. Makes namespace nbench-$$ (a veth pair with no link to the host, removed at exit),
# a batch file of PAIRS (default 100000) `route get 10.9.0.N` lines, and for each round runs
# the burst untraced, then under each binary in turn with `--comm ip` and
# `--format json --output F`, `--pcap F` (text still goes to stdout) and `--format text`,
# stdout to /dev/null. One line per run: storm wall time, the tracer's CPU from just before the
# burst until it has caught up (/proc/PID/stat) and per event, its whole-run user/sys CPU and
# peak RSS (/usr/bin/time), and its stderr summary (events, lost records by reason).
set -u
BEFORE=$1; AFTER=$2; ROUNDS=${3:-3}; PAIRS=${4:-100000}
NS=nbench-$$
WORK=$(mktemp -d)
trap 'ip netns del $NS 2>/dev/null; rm -rf "$WORK"' EXIT
. "$(dirname "$0")/burst-namespace.sh"
burst_namespace $NS "$WORK" "$PAIRS"

storm_ms() {
    local s e
    s=$(date +%s%N)
    ip -n $NS -batch "$WORK/batch" >/dev/null
    e=$(date +%s%N)
    echo $(((e - s) / 1000000))
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

one_run() { # LABEL BIN MODE
    local label=$1 bin=$2 mode=$3 args pid tpid t0 t1 ms prev cur summary events
    case $mode in
        json) args=(--format json --output "$WORK/out.jsonl") ;;
        pcap) args=(--pcap "$WORK/out.pcap") ;;
        text) args=(--format text) ;;
    esac
    rm -f "$WORK/ready" "$WORK"/out.*
    sync # the last run's freed blocks written back before this run, not during its burst
    /usr/bin/time -f "%U %S %M" -o "$WORK/time" "$bin" trace --comm ip --ready-file "$WORK/ready" \
        "${args[@]}" >/dev/null 2>"$WORK/err" &
    tpid=$!
    for _ in $(seq 300); do [ -s "$WORK/ready" ] && break; sleep 0.1; done
    pid=$(cat "$WORK/ready")
    sleep 0.5
    t0=$(cpu_ticks "$pid")
    ms=$(storm_ms)
    # The consumer has caught up when it is busy for under a tenth of a 0.3 s window (3 ticks
    # of 10 ms; an idle tracer still polls, so "no CPU at all" may never come), as in
    # `cargo xtask bench`.
    prev=$(cpu_ticks "$pid")
    while :; do
        sleep 0.3
        cur=$(cpu_ticks "$pid")
        [ $((cur - prev)) -lt 3 ] && break
        prev=$cur
    done
    t1=$(cpu_ticks "$pid")
    kill -INT "$pid"
    wait "$tpid"
    # "N events, M lost", or with a pcap alone "N netlink buffers captured (…), M lost": per
    # event (or per buffer) of what the trace made.
    summary=$(grep -E '^nodeip-trace: [0-9]+ .*, [0-9]+ lost' "$WORK/err" | tail -1)
    events=$(echo "$summary" | sed -E 's/^nodeip-trace: ([0-9]+) .*/\1/')
    read -r user sys rss < "$WORK/time"
    local cpu_ms=$(((t1 - t0) * 1000 / $(getconf CLK_TCK)))
    echo "$label $mode storm_ms=$ms burst_cpu_ms=$cpu_ms us_per_event=$(echo "scale=2; $cpu_ms * 1000 / $events" | bc) user=$user sys=$sys peak_rss_kib=$rss | $summary"
}

for round in $(seq "$ROUNDS"); do
    echo "untraced storm_ms=$(storm_ms)"
    for mode in ${MODES:-json pcap text}; do
        one_run before "$BEFORE" $mode
        one_run after "$AFTER" $mode
    done
done
