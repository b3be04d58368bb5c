#!/bin/bash
# Looks for the netlink storm's rare loss (BENCHMARKS.md, 2026-11-28 09:06 UTC): ROUNDS times,
# a tracer of the whole node (`trace --format json`, the bench's storm rows) and two storms of
# 20,000 `route get`s right after it starts, each beside a `dd` that writes WRITE_MB to the
# filesystem of $TMPDIR and syncs it (WRITE_MB=0: no writer). One line per round: the storms'
# wall time and the tracer's summary, which for a loss to a full ring says how full the ring was
# found and how late its drain thread came.
#
#   contrib/bench/storm-loss.sh [TRACER_BIN] [ROUNDS] [WRITE_MB]
#
# As root. Makes namespace nloss-$$ (a veth pair with no link to the host) and a scratch
# directory, both removed at exit.
set -u
BIN=${1:-target/release/nodeip-trace}; ROUNDS=${2:-20}; WRITE_MB=${3:-3000}
NS=nloss-$$
WORK=$(mktemp -d)
trap 'ip netns del $NS 2>/dev/null; rm -rf "$WORK"' EXIT
ip netns add $NS
ip -n $NS link set lo up
ip -n $NS link add veth0 type veth peer name veth1
ip -n $NS link set veth0 up
ip -n $NS link set veth1 up
ip -n $NS addr add 10.77.0.1/16 dev veth0
for i in $(seq 0 19999); do echo "route get 10.77.$(((i / 250) % 250)).$((i % 250 + 1))"; done > "$WORK/batch"

for r in $(seq "$ROUNDS"); do
    dd_pid=
    if [ "$WRITE_MB" -gt 0 ]; then
        dd if=/dev/zero of="$WORK/big" bs=1M count="$WRITE_MB" conv=fsync 2>/dev/null &
        dd_pid=$!
        sleep 1 # the writer is at full speed, its dirty pages being written back
    fi
    rm -f "$WORK/ready"
    "$BIN" trace --format json --ready-file "$WORK/ready" >"$WORK/out.jsonl" 2>"$WORK/err" &
    tracer=$!
    for _ in $(seq 600); do [ -s "$WORK/ready" ] && break; sleep 0.05; done
    s=$(date +%s%N)
    ip -n $NS -batch "$WORK/batch" >/dev/null
    ip -n $NS -batch "$WORK/batch" >/dev/null
    e=$(date +%s%N)
    sleep 2
    kill -INT $tracer
    wait $tracer
    echo "round $r: storms $(((e - s) / 1000000)) ms; $(grep ' lost' "$WORK/err" | tail -1 | sed 's/^nodeip-trace: //')"
    if [ -n "$dd_pid" ]; then wait "$dd_pid"; rm -f "$WORK/big"; fi
done
