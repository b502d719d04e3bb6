#!/usr/bin/env bash
# tests/fuzz/coverage.sh [BUILD]: the lines of oar's parsing code that each fuzz target's corpus reaches, by
# gcov. Rebuilds the targets in BUILD (default build/) with OAR_FUZZ_GCOV=ON, runs each over its corpus in
# tests/fuzz/corpus/ once (no fuzzing: -runs=0), and prints, per target, the lines executed in the files that
# target is about. Turns OAR_FUZZ_GCOV off again at the end (the next build recompiles the copies without it).
# docs/reliability.md has the figures.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$(realpath "${1:-build}")
targets=(program tensor_file checkpoint idx lod onnx serve)
cmake -DOAR_FUZZ_GCOV=ON "$build" > /dev/null
trap 'cmake -DOAR_FUZZ_GCOV=OFF "$build" > /dev/null' EXIT
cmake --build "$build" -j"$(nproc)" --target $(printf 'fuzz_%s ' "${targets[@]}") > /dev/null
objs="$build/tests/fuzz/CMakeFiles"
# The files each target is about (the parser and checks it drives), relative to the repository.
declare -A files=(
  [program]="include/oar/ir/serialize-inl.hpp include/oar/ir/wire-inl.hpp include/oar/ops/registry-inl.hpp"
  [tensor_file]="include/oar/io/tensor_file-inl.hpp"
  [checkpoint]="include/oar/io/checkpoint-inl.hpp include/oar/io/tensor_file-inl.hpp"
  [idx]="include/oar/io/idx-inl.hpp"
  [lod]="include/oar/runtime/executor-inl.hpp include/oar/device/tensor-inl.hpp"
  [onnx]="src/onnx/import.cpp src/onnx/import_elementwise.cpp src/onnx/import_nn.cpp src/onnx/import_shape.cpp"
  [serve]="src/serve/protocol.cpp"
)
export ASAN_OPTIONS="protect_shadow_gap=0:detect_leaks=0"
printf '%-12s %-45s %s\n' target file "lines executed"
for t in "${targets[@]}"; do
  [[ -x $build/tests/fuzz/fuzz_$t ]] || continue
  find "$objs" -name '*.gcda' -delete
  "$build/tests/fuzz/fuzz_$t" -runs=0 tests/fuzz/corpus/$t > /dev/null 2>&1 || { echo "fuzz_$t failed on its corpus"; exit 1; }
  report=$(cd "$objs" && find . -name '*.gcda' -print0 | xargs -0 gcov -n 2>/dev/null || true)
  for f in ${files[$t]}; do
    line=$(grep -A1 "^File '$PWD/$f'" <<< "$report" | grep -m1 'Lines executed' || true)
    printf '%-12s %-45s %s\n' "$t" "$f" "${line#Lines executed:}"
  done
done
