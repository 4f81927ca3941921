#!/usr/bin/env bash
# Builds the importer fuzzers and the span block, instant block and stored summary decoders'
# (libFuzzer, clang, ASan + UBSan) in build-fuzz and runs each for SECONDS (default 30) on a
# generated seed corpus. Exits non-zero if a fuzzer finds a crash, a leak, a sanitizer error or a
# timeout; the reproducer lands in build-fuzz/artifacts/.
# Needs clang-16 and libclang-rt-16-dev (libFuzzer + sanitizer runtimes). Why 16: core's
# Result is std::expected from libstdc++ 12, whose <expected> is enabled only when
# __cpp_concepts >= 202002L. Clang 16 implements what it needs (P0848, conditionally trivial
# special members) but still reports 201907L, so the macro is raised below; clang 14 lacks P0848.
# Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
SECONDS_EACH="${1:-30}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${ROOT}/build-fuzz"
CC_BIN="${CC_FUZZ:-clang-16}"
CXX_BIN="${CXX_FUZZ:-clang++-16}"
command -v "${CXX_BIN}" >/dev/null || { echo "fuzz.sh: ${CXX_BIN} not found (apt-get install clang-16 libclang-rt-16-dev)" >&2; exit 2; }

# Sanitizers on the library too (not only the fuzz entry points), -fsanitize=fuzzer-no-link so
# that coverage guides the fuzzer through the importer code.
SAN="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S "${ROOT}" -B "${BUILD}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="${CC_BIN}" -DCMAKE_CXX_COMPILER="${CXX_BIN}" \
  -DCMAKE_CXX_FLAGS="${SAN} -D__cpp_concepts=202002L -Wno-builtin-macro-redefined -Wno-macro-redefined" \
  -DCMAKE_C_FLAGS="${SAN}" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DLOCKSTEP_BUILD_FUZZERS=ON -DLOCKSTEP_BUILD_UI=OFF -DLOCKSTEP_BUILD_RUNTIME=OFF \
  -DLOCKSTEP_BUILD_TESTS=OFF -DLOCKSTEP_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build "${BUILD}" -j2 --target fuzz_kineto fuzz_nsys fuzz_span_block fuzz_instant_block fuzz_summary_part fuzz_make_seeds

CORPUS="${BUILD}/corpus"
ARTIFACTS="${BUILD}/artifacts"
mkdir -p "${ARTIFACTS}"
"${BUILD}/core/import/fuzz_make_seeds" "${CORPUS}/kineto" "${CORPUS}/nsys"
# The block and summary decoders start from an empty corpus: their formats are small enough for
# libFuzzer to find (a format byte, varints) on their own.
mkdir -p "${CORPUS}/span_block" "${CORPUS}/instant_block" "${CORPUS}/summary_part"

status=0
for fuzzer in fuzz_kineto fuzz_nsys fuzz_span_block fuzz_instant_block fuzz_summary_part; do
  name="${fuzzer#fuzz_}"
  echo "== ${fuzzer}: ${SECONDS_EACH} s"
  # -timeout: one input taking > 10 s is a hang; -rss_limit_mb: the importers must stay small.
  if ! ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
      "${BUILD}/core/import/${fuzzer}" -max_total_time="${SECONDS_EACH}" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -print_final_stats=1 -artifact_prefix="${ARTIFACTS}/${name}-" "${CORPUS}/${name}" \
      >"${BUILD}/${fuzzer}.log" 2>&1; then
    echo "fuzz.sh: ${fuzzer} failed; see ${BUILD}/${fuzzer}.log and ${ARTIFACTS}/" >&2
    tail -40 "${BUILD}/${fuzzer}.log" >&2
    status=1
  else
    grep -E "stat::number_of_executed_units|Done [0-9]+ runs" "${BUILD}/${fuzzer}.log" | tail -2 || true
  fi
done
exit ${status}
