#!/usr/bin/env bash
# tests/mpi/mpirun.sh RANK_BINARY CASE: one distributed test case for ctest, on localhost.
#   equal-NP-MODEL       mpirun -np NP: parameters equal one process, identical on every rank
#   zero-NP              ZeRO stage 1 on NP ranks: the parameters of plain data parallel, 1 / NP of its state
#   mismatch             rank 1 gathers where rank 0 sums: both fail at once, naming the difference
#   checkpoint           a 2-rank checkpoint resumes on 3 ranks and in one process
#   stall-SIGNAL         rank 1 of 3 stops (STOP) or dies (KILL): ranks 0 and 2 fail naming it, the
#                        last checkpoint loads
set -uo pipefail
bin=$1
case_=$2
# As root Open MPI refuses to start without these; more ranks than cores need --oversubscribe.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Localhost only: ranks talk through shared memory (vader) and mpirun's own daemons over the loopback.
mpi=(mpirun --oversubscribe --bind-to none --mca btl self,vader --mca oob_tcp_if_include lo)
work=$(mktemp -d)
# Whatever happens, no rank of this case outlives it (a stopped one included).
trap 'pkill -KILL -f "oar_dist_rank .*$work" 2> /dev/null; rm -rf "$work"' EXIT
run() {  # NP ARGS...: all ranks must pass
  local np=$1; shift
  local out="$work/out.$RANDOM"
  timeout 300 "${mpi[@]}" -np "$np" "$bin" "$@" > "$out" 2>&1
  local rc=$?
  cat "$out"
  [[ $rc -eq 0 ]] || { echo "mpirun -np $np $* exited with $rc"; exit 1; }
  [[ $(grep -c '^PASS' "$out") -eq $np ]] || { echo "not every rank passed"; exit 1; }
}
case $case_ in
  equal-*)
    IFS=- read -r _ np model <<< "$case_"
    run "$np" equal "$model" ;;
  zero-*)
    run "${case_#zero-}" zero "$work" ;;
  mismatch)
    # The timeout is 3 s: a failure within 2 s means the ranks saw the mismatch, not the deadline.
    start=$(date +%s%N)
    timeout 60 "${mpi[@]}" --enable-recovery -np 2 "$bin" mismatch > "$work/out" 2>&1
    took=$(( ($(date +%s%N) - start) / 1000000 ))
    cat "$work/out"
    for r in 0 1; do
      grep -q "^FAILED-AS-EXPECTED rank $r: .*differs between the ranks" "$work/out" || { echo "rank $r did not report the mismatch"; exit 1; }
    done
    [[ $took -lt 2000 ]] || { echo "the mismatch took $took ms to report: the timeout, not the check"; exit 1; }
    echo "both ranks reported the mismatch within $took ms" ;;
  checkpoint)
    run 2 save "$work"
    run 3 resume "$work"
    "$bin" resume "$work" || exit 1 ;;
  stall-*)
    sig=${case_#stall-}
    # --enable-recovery: mpirun keeps the other ranks alive when one dies, so that they report it themselves.
    # A stopped rank never ends, so once ranks 0 and 2 have reported, the stopped one is killed here, as the
    # operator or the batch system would (without --enable-recovery mpirun ends the job at the first error).
    start=$(date +%s)
    timeout 120 "${mpi[@]}" --enable-recovery -np 3 "$bin" stall "$work" "$sig" > "$work/out" 2>&1 &
    job=$!
    for _ in $(seq 600); do
      [[ $(grep -c '^FAILED-' "$work/out") -ge 2 ]] && break
      kill -0 $job 2> /dev/null || break
      sleep 0.1
    done
    took=$(( $(date +%s) - start ))
    [[ $sig == STOP ]] && pkill -KILL -f "oar_dist_rank stall $work" 
    wait $job
    rc=$?
    cat "$work/out"
    [[ $rc -ne 124 ]] || { echo "the job hung"; exit 1; }
    for r in 0 2; do
      grep -q "^FAILED-AS-EXPECTED rank $r: .*rank 1 did not reach it within 3 s" "$work/out" || { echo "rank $r did not fail naming rank 1"; exit 1; }
    done
    echo "ranks 0 and 2 reported rank 1 $took s after the job started"
    "$bin" load "$work" || exit 1 ;;
  *) echo "unknown case $case_"; exit 2 ;;
esac
