#!/usr/bin/env bash
# bench/compile_time.sh: how long one model translation unit takes to compile, as a user builds it.
#
# Builds and installs oar (Release) under a work folder, then compiles the README's example
# (examples/mnist_mlp.cpp) at -O2 as a project using the installed package would: with oar::oar (declarations
# only; liboar links the implementation) and with oar::header_only (everything in the unit); then the same MLP
# written against LibTorch (bench/compile_time/torch_mlp.cpp) when LibTorch is installed. Each time is the best
# of REPS runs of the unit's own compile command (no ccache), so the figures compare on one machine and run.
# Last, a one-line edit of the model: exactly one unit must be rebuilt.
# Fails (exit 1) when the oar::oar unit takes longer than TARGET_S seconds.
#
# Usage, from anywhere: bash bench/compile_time.sh [work folder, default build-compile-time]
#   REPS=3 TARGET_S=10 CXX=g++ bash bench/compile_time.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(realpath -m "${1:-$root/build-compile-time}")
reps=${REPS:-3}
target_s=${TARGET_S:-10}
cxx=${CXX:-g++}
gen=()
command -v ninja > /dev/null && gen=(-G Ninja)
mkdir -p "$work"

echo "== building and installing oar (Release) into $work/prefix"
cmake -S "$root" -B "$work/oar" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" \
  -DOAR_BUILD_TESTS=OFF -DOAR_BUILD_EXAMPLES=OFF -DOAR_BUILD_TOOLS=OFF > "$work/oar.configure.log"
cmake --build "$work/oar" -j"$(nproc)" > "$work/oar.build.log"
cmake --install "$work/oar" --prefix "$work/prefix" > /dev/null

# project NAME SOURCE CMAKE_LINES: a one-unit project in $work/NAME compiling SOURCE as model.cpp at -O2.
project() {
  local dir=$work/$1
  rm -rf "$dir" && mkdir -p "$dir/src"
  cp "$2" "$dir/src/model.cpp"
  printf 'cmake_minimum_required(VERSION 3.25)\nproject(model LANGUAGES CXX)\nset(CMAKE_CXX_STANDARD 20)\n%s\n' "$3" > "$dir/src/CMakeLists.txt"
  cmake -S "$dir/src" -B "$dir/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" \
    -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_PREFIX_PATH="$work/prefix" > "$dir/configure.log"
}

# seconds NAME: the best of $reps runs of model.cpp's compile command in project NAME.
seconds() {
  local dir=$work/$1/build cmd best="" t0 t1 s
  cmd=$(sed -n 's/^ *"command": "\(.*\)",$/\1/p' "$dir/compile_commands.json" | head -1 | sed 's/\\"/"/g')
  for _ in $(seq "$reps"); do
    t0=$(date +%s.%N)
    (cd "$dir" && eval "$cmd")
    t1=$(date +%s.%N)
    s=$(awk "BEGIN { print $t1 - $t0 }")
    if [ -z "$best" ] || awk "BEGIN { exit !($s < $best) }"; then best=$s; fi
  done
  printf '%.1f' "$best"
}

echo "== compiling examples/mnist_mlp.cpp at -O2, best of $reps"
project lib "$root/examples/mnist_mlp.cpp" 'find_package(oar CONFIG REQUIRED)
add_executable(model model.cpp)
target_link_libraries(model PRIVATE oar::oar)'
lib_s=$(seconds lib)
echo "oar::oar          ${lib_s} s"
project header_only "$root/examples/mnist_mlp.cpp" 'find_package(oar CONFIG REQUIRED)
add_executable(model model.cpp)
target_link_libraries(model PRIVATE oar::header_only)'
ho_s=$(seconds header_only)
echo "oar::header_only  ${ho_s} s"
torch_s="-"
if project torch "$root/bench/compile_time/torch_mlp.cpp" 'find_package(Torch REQUIRED)
add_executable(model model.cpp)
target_link_libraries(model PRIVATE ${TORCH_LIBRARIES})' 2> /dev/null; then
  torch_s=$(seconds torch)
  echo "LibTorch MLP      ${torch_s} s"
else
  echo "LibTorch MLP      - (LibTorch not found: apt-get install libtorch-dev)"
fi

echo "== a one-line edit of the model with oar::oar"
cmake --build "$work/lib/build" > /dev/null
sed -i 's/oar::fc(img, 200)/oar::fc(img, 256)/' "$work/lib/src/model.cpp"
t0=$(date +%s.%N)
units=$(cmake --build "$work/lib/build" | grep -c -E 'Building CXX|\.cpp\.o' || true)
t1=$(date +%s.%N)
rebuild_s=$(awk "BEGIN { printf \"%.1f\", $t1 - $t0 }")
echo "units rebuilt: $units, rebuild (compile + link) ${rebuild_s} s"

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo
echo "| unit (examples/mnist_mlp.cpp unless named) | compile at -O2 |"
echo "|---|---|"
echo "| oar::oar (target <= ${target_s} s) | ${lib_s} s |"
echo "| oar::header_only | ${ho_s} s |"
echo "| LibTorch, the same MLP (bench/compile_time/torch_mlp.cpp) | ${torch_s} s |"
echo "| oar::oar after a one-line edit: units rebuilt, compile + link | ${units}, ${rebuild_s} s |"
echo "($($cxx --version | head -1); $cpu, $(nproc) cores; best of $reps)"
ok=1
awk "BEGIN { exit !($lib_s <= $target_s) }" || { echo "FAIL: oar::oar took ${lib_s} s, the target is ${target_s} s"; ok=0; }
[ "$units" = 1 ] || { echo "FAIL: a one-line edit rebuilt $units units, not 1"; ok=0; }
[ $ok = 1 ] && echo "PASS"
[ $ok = 1 ]
