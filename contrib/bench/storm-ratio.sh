#!/bin/bash
# The netlink storm's ratio for one tracer binary, quicker than the whole bench: ROUNDS times,
# an untraced storm of 20,000 `route get`s (`ip -n NS -batch`), a tracer of the whole node
# (`trace --format json`, as the bench's storm rows) started, two traced storms, the tracer
# stopped, and another untraced storm; the medians of each side and their ratio. STOP=1 stops
# the tracer (SIGSTOP) through its storms: the kernel side without the consumer (give it
# `--ring-buffer-mib 64` so that nothing is lost meanwhile). Extra arguments go to `trace`,
# e.g. `--comm no-such-comm` for the hooks alone.
#
#   [STOP=1] contrib/bench/storm-ratio.sh TRACER_BIN ROUNDS [TRACE_ARGS...]
#
# As root. Makes namespace nratio-$$ (a veth pair with no link to the host) and a scratch
# directory, both removed at exit. Used for the 2026-11-29 01:50 entry of BENCHMARKS.md (a
# tracer built to make header-only records).
set -u
BIN=${1:?tracer binary}; ROUNDS=${2:?rounds}; shift 2
NS=nratio-$$
WORK=$(mktemp -d)
TRACER=
trap '[ -n "$TRACER" ] && kill -CONT $TRACER 2>/dev/null && kill $TRACER 2>/dev/null; ip netns del $NS 2>/dev/null; rm -rf "$WORK"' EXIT
# shellcheck source=contrib/bench/burst-namespace.sh
. "$(dirname "$0")/burst-namespace.sh"
burst_namespace "$NS" "$WORK" 20000

storm_us() {
    local start
    start=$(date +%s%N)
    ip -n "$NS" -batch "$WORK/batch" >/dev/null
    echo $((($(date +%s%N) - start) / 1000))
}

untraced=()
traced=()
for _ in $(seq "$ROUNDS"); do
    untraced+=("$(storm_us)")
    "$BIN" trace --format json "$@" >"$WORK/out.jsonl" 2>"$WORK/err" &
    TRACER=$!
    # Attached when it prints its first event (its own start-up records) or after 5 s.
    for _ in $(seq 50); do [ -s "$WORK/out.jsonl" ] && break; sleep 0.1; done
    sleep 1
    [ -n "${STOP:-}" ] && kill -STOP $TRACER
    traced+=("$(storm_us)" "$(storm_us)")
    [ -n "${STOP:-}" ] && kill -CONT $TRACER
    kill -INT $TRACER
    wait $TRACER
    TRACER=
    untraced+=("$(storm_us)")
done
python3 - "${untraced[*]}" "${traced[*]}" <<'EOF'
import statistics, sys
u = [int(x) for x in sys.argv[1].split()]
t = [int(x) for x in sys.argv[2].split()]
mu, mt = statistics.median(u), statistics.median(t)
print(f"untraced median {mu / 1000:.1f} ms ({min(u) / 1000:.0f}-{max(u) / 1000:.0f}), "
      f"traced median {mt / 1000:.1f} ms ({min(t) / 1000:.0f}-{max(t) / 1000:.0f}), "
      f"ratio {mt / mu:.3f}")
EOF
tail -1 "$WORK/err"
