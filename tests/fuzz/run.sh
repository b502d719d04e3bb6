#!/usr/bin/env bash
# tests/fuzz/run.sh: runs one fuzz target.
#   run.sh TARGET CORPUS WORK SECONDS [RUNS] [-dict=FILE]
# New inputs go to WORK (made here); CORPUS, the seeds kept in the repository, is only read. SECONDS and RUNS
# (executions; 0 = no limit) bound the run, whichever comes first. Any allocation over 512 MB counts as a crash:
# a file that declares absurd sizes must be refused before it is allocated. Exits non-zero on a crash, a leak, a
# sanitizer report, a timeout (20 s for one input) or an exception that is not an oar::Error; the input is left
# in WORK/crashes.
set -euo pipefail
target=$1 corpus=$2 work=$3 seconds=$4 runs=${5:-0}
shift $(($# < 5 ? $# : 5))
mkdir -p "$work/new" "$work/crashes"
export ASAN_OPTIONS="protect_shadow_gap=0:detect_leaks=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:abort_on_error=1:${UBSAN_OPTIONS:-}"  # abort: libFuzzer then keeps the input
exec "$target" -max_total_time="$seconds" -runs="$([ "$runs" = 0 ] && echo -1 || echo "$runs")" -malloc_limit_mb=512 -rss_limit_mb=2560 \
  -timeout=20 -print_final_stats=1 -artifact_prefix="$work/crashes/" "$@" "$work/new" "$corpus"
