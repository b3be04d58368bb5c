#!/bin/bash
# The live consumer's deterministic costs under a route-get burst, for one tracer binary
# (BENCHMARKS.md, 2026-11-28 17:00 UTC): instructions per event (callgrind, the difference
# between a LARGE and a SMALL burst over the events between them, so start-up cancels) and
# allocations per route get (uprobes on mimalloc's entry points, counted by perf stat through a
# SMALL burst). The host's noise moves the tracer's CPU per event by ±30% from hour to hour;
# these two do not move.
#
#   contrib/bench/consumer-instructions.sh [TRACER_BIN] [SMALL] [LARGE]
#
# As root, with valgrind and perf. Makes namespace ninstr-$$ (a veth pair with no link to the
# host) and a scratch directory, both removed at exit, and removes the uprobes it added.
set -u
BIN=$(realpath "${1:-target/release/nodeip-trace}"); SMALL=${2:-2000}; LARGE=${3:-12000}
NS=ninstr-$$
WORK=$(mktemp -d)
trap 'ip netns del $NS 2>/dev/null; perf probe -q -d "ninstr:*" 2>/dev/null; rm -rf "$WORK"' EXIT
. "$(dirname "$0")/burst-namespace.sh"
burst_namespace $NS "$WORK" "$LARGE"

# start_tracer WRAPPER...: the tracer (under WRAPPER, if any) tracing `ip`, JSON to a file;
# sets TPID and waits until its probes are attached.
start_tracer() {
    rm -f "$WORK/ready" "$WORK/out.jsonl"
    "$@" "$BIN" trace --comm ip --ready-file "$WORK/ready" --format json \
        --output "$WORK/out.jsonl" >/dev/null 2>"$WORK/err" &
    TPID=$!
    for _ in $(seq 600); do [ -s "$WORK/ready" ] && return; sleep 0.2; done
    echo "the tracer did not start: $(tail -3 "$WORK/err")" >&2
    exit 1
}

stop_tracer() { # after the burst: let it catch up, then stop it
    sleep "${1:-2}"
    kill -INT "$TPID"
    wait "$TPID"
}

burst() { head -"$1" "$WORK/batch" > "$WORK/part"; ip -n $NS -batch "$WORK/part" >/dev/null; }

instructions() { # PAIRS: instructions of a whole traced run with a burst of PAIRS route gets
    start_tracer valgrind --tool=callgrind --callgrind-out-file="$WORK/cg" --log-file="$WORK/vg"
    sleep 2
    burst "$1"
    stop_tracer 8
    grep -o 'Collected : [0-9]*' "$WORK/vg" | awk '{print $3}'
}

events() { grep -oE '^nodeip-trace: [0-9]+ events' "$WORK/err" | awk '{print $2}'; }

small=$(instructions "$SMALL"); small_events=$(events)
large=$(instructions "$LARGE"); large_events=$(events)
echo "instructions per event: $(((large - small) / (large_events - small_events))) ($small for $small_events events, $large for $large_events)"

for f in mi_malloc mi_zalloc mi_malloc_aligned mi_realloc; do
    perf probe -q -x "$BIN" -a "ninstr:$f=$f" >/dev/null 2>&1
done
start_tracer
perf stat -x, -e 'ninstr:*' -p "$(cat "$WORK/ready")" -o "$WORK/stat" &
SPID=$!
sleep 0.5
burst "$SMALL"
sleep 2
kill -INT $SPID
wait $SPID
stop_tracer 0
allocations=$(awk -F, '/ninstr:/ {n += $1} END {print n}' "$WORK/stat")
echo "allocations per route get: $(echo "scale=1; $allocations / $SMALL" | bc) ($allocations for $SMALL route gets)"
