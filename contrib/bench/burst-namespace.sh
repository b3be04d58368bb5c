# Sourced by the burst scripts here: the namespace and route-get batch they share.
#
#   burst_namespace NS WORK PAIRS
#
# Makes namespace NS, a veth pair with no link to the host, 10.9.0.1/24 on veth0, and
# WORK/batch: PAIRS `route get 10.9.0.N` lines for `ip -n NS -batch`. The caller removes NS
# (and WORK) at exit.
burst_namespace() {
    local ns=$1 work=$2 pairs=$3
    ip netns add "$ns"
    ip -n "$ns" link add veth0 type veth peer name veth1
    ip -n "$ns" link set veth0 up
    ip -n "$ns" link set veth1 up
    ip -n "$ns" addr add 10.9.0.1/24 dev veth0
    ip -n "$ns" link set lo up
    for i in $(seq 0 $((pairs - 1))); do echo "route get 10.9.0.$((i % 250 + 2))"; done > "$work/batch"
}
