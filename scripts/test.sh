#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs every test through ctest, then runs
# each importer's fuzzer for a bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
(cd build && ctest --output-on-failure --timeout 300)
bash scripts/fuzz.sh "${LOCKSTEP_FUZZ_SECONDS:-20}"
