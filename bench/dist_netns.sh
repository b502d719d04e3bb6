#!/usr/bin/env bash
# bench/dist_netns.sh OAR_BENCH [NET...]: data-parallel training past one machine, simulated on this one.
# Two ranks run in two network namespaces of their own, each joined to the host's by a veth pair whose
# outgoing rate `tc tbf` limits (a full-duplex link of that rate per rank); MPI goes over TCP between them,
# routed through the host. For each rate, bucket size and overlap setting it prints the measured step time
# next to a model of it:
#   no overlap: t = t_compute + 2 (N - 1) / N * gradient bytes / rate
# and how much of the all-reduce the backward pass hid (the model's time minus the measured one). Latency
# is not added (the netem qdisc is not available here), so it enters the model as zero; each bucket's ring
# takes 2 (N - 1) message latencies on a real network. NET: conv (default) and/or resnet18. As root.
# The namespaces, links and the forwarding setting are removed again however the run ends.
set -euo pipefail
bench=$(realpath "$1")
shift
nets=("${@:-conv}")
work=$(mktemp -d)
fwd=$(sysctl -n net.ipv4.ip_forward)
cleanup() {
  for i in 0 1; do
    ip netns del "oarsim$i" 2> /dev/null || true
    ip link del "oarsimv$i" 2> /dev/null || true
  done
  sysctl -qw net.ipv4.ip_forward="$fwd" || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

for i in 0 1; do
  ip netns add "oarsim$i"
  ip link add "oarsimv$i" type veth peer name "oarsimp$i"
  ip link set "oarsimp$i" netns "oarsim$i"
  ip addr add "10.78.$i.1/24" dev "oarsimv$i"
  ip link set "oarsimv$i" up
  ip -n "oarsim$i" addr add "10.78.$i.2/24" dev "oarsimp$i"
  ip -n "oarsim$i" link set "oarsimp$i" up
  ip -n "oarsim$i" link set lo up
  ip -n "oarsim$i" route add default via "10.78.$i.1"
done
sysctl -qw net.ipv4.ip_forward=1
# mpirun starts each host's daemon through this agent instead of ssh: "agent HOST command..." runs the command
# in the namespace named HOST.
cat > "$work/agent" << 'EOF'
#!/bin/sh
host=$1
shift
exec ip netns exec "$host" /bin/sh -c "$*"
EOF
chmod +x "$work/agent"
printf 'oarsim0 slots=1\noarsim1 slots=1\n' > "$work/hosts"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun --hostfile "$work/hosts" -np 2 --bind-to none --mca plm_rsh_agent "$work/agent" --mca plm_rsh_no_tree_spawn 1
     --mca btl tcp,self --mca btl_tcp_if_include 10.78.0.0/16 --mca oob_tcp_if_include 10.78.0.0/16)

# child BLOCKS BLOCK for each net: conv steps are short, resnet18 steps take seconds
blocks_of() { [[ $1 == conv ]] && echo "5 10" || echo "2 2"; }
limit_of() { [[ $1 == conv ]] && echo 60 || echo 180; }

echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), nproc $(nproc)"
echo "| net | link | bucket | overlap | step (ms) | model without overlap (ms) | all-reduce alone (ms) | hidden (ms) | waited per step (ms) |"
echo "|---|---|---|---|---|---|---|---|---|"
for net in "${nets[@]}"; do
  read -r blocks block <<< "$(blocks_of "$net")"
  limit=$(limit_of "$net")
  # Compute alone: the same child in one process (a world of one: no collective at all).
  read -r _ compute _ _ bytes <<< "$("$bench" --child-dist "$net" "$blocks" "$block" 26214400 1 | grep '^DIST')"
  for rate in 10gbit 1gbit; do
    for i in 0 1; do
      ip netns exec "oarsim$i" tc qdisc replace dev "oarsimp$i" root tbf rate "$rate" burst 1mbit latency 200ms
    done
    bits=$(( ${rate%gbit} * 1000000000 ))
    for bucket in 1048576 26214400; do
      for overlap in 1 0; do
        # Open MPI's launch through the agent now and then leaves a daemon waiting: try again, bounded in time.
        line=""
        for _ in 1 2 3; do
          line=$(timeout "$limit" "${mpi[@]}" "$bench" --child-dist "$net" "$blocks" "$block" "$bucket" "$overlap" 2>&1 | grep '^DIST') && break
          pkill -f "orted.*oarsim" 2> /dev/null || true
        done
        [[ -n $line ]] || { echo "mpirun between the namespaces failed ($net, $rate)"; exit 1; }
        read -r _ step comm waited _ <<< "$line"
        awk -v net="$net" -v rate="$rate" -v bucket="$bucket" -v ov="$overlap" -v step="$step" -v comm="$comm" -v waited="$waited" \
            -v compute="$compute" -v bytes="$bytes" -v bits="$bits" 'BEGIN {
          wire = 2 * (2 - 1) / 2 * bytes * 8 / bits;
          model = compute + wire;
          printf "| %s | %s | %.0f MB | %s | %.1f | %.1f | %.1f | %.1f | %.1f |\n", net, rate, bucket / 1048576, ov ? "on" : "off",
                 1e3 * step, 1e3 * model, 1e3 * wire, 1e3 * (model - step), 1e3 * waited }'
      done
    done
  done
  awk -v net="$net" -v compute="$compute" -v bytes="$bytes" 'BEGIN { printf "# %s: compute alone %.1f ms per step (one process), %.2f MB of gradients\n", net, 1e3 * compute, bytes / 1048576 }'
done
