#!/usr/bin/env bash
# Builds and runs every test: unit, black-box and differential tests on a release build,
# the same suite again under ASan+UBSan, and each fuzzer for a bounded time.
# STALKD_FUZZ_SECONDS (default 30) sets the fuzzing time per target; 0 skips fuzzing.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc)
# Each stage's wall time, printed at the end (the README says how long the whole takes).
t0=$SECONDS
stage_start=$SECONDS
stages=()
stage_done() { stages+=("$1: $((SECONDS - stage_start)) s"); stage_start=$SECONDS; }

echo "== format (clang-format, .clang-format)"
clang-format --dry-run --Werror src/*/*.cc src/*/*.h bench/micro_bench.cc fuzz/*.cc

echo "== release build"
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTALKD_WERROR=ON >/dev/null
cmake --build build/release
(cd build/release && ctest --output-on-failure -j "$jobs") | tee build/release-ctest.log
stage_done "format check, release build and tests"

echo "== ASan+UBSan build"
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSTALKD_SANITIZE=address,undefined \
  -DSTALKD_WERROR=ON >/dev/null
cmake --build build/asan
(cd build/asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j "$jobs") \
  | tee build/asan-ctest.log
stage_done "ASan+UBSan build and tests"

fuzz_seconds=${STALKD_FUZZ_SECONDS:-30}
if [ -d fuzz ] && [ "$fuzz_seconds" -gt 0 ]; then
  echo "== fuzzing (${fuzz_seconds}s per target)"
  cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ \
    -DSTALKD_SANITIZE=address,undefined -DSTALKD_FUZZ=ON >/dev/null
  cmake --build build/fuzz --target fuzz_targets
  for target in build/fuzz/fuzz/*_fuzz; do
    name=$(basename "$target")
    corpus=build/fuzz/corpus/$name
    mkdir -p "$corpus"
    log=build/fuzz/$name.log
    if ! "$target" -max_total_time="$fuzz_seconds" -print_final_stats=0 \
         -artifact_prefix=build/fuzz/ "$corpus" "fuzz/corpus/$name" >"$log" 2>&1; then
      tail -n 80 "$log"
      echo "fuzzer $name failed; the input is in build/fuzz/ (crash-*)"
      exit 1
    fi
    echo "$name: $(grep -c '^#' "$log") progress lines, no failure"
  done
  stage_done "fuzzing"
fi
# ctest printed "N tests failed out of M" for each build; with set -e and pipefail we only get
# here if both passed.
total=0
for log in build/release-ctest.log build/asan-ctest.log; do
  n=$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' "$log" | tail -n 1)
  total=$((total + ${n:-0}))
done
echo "== all tests passed (release and ASan+UBSan builds, then fuzzing)"
echo "stalkd: $total passed, 0 failed"
printf '  %s\n' "${stages[@]}"
echo "  in all: $((SECONDS - t0)) s"
