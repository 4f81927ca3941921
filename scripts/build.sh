#!/usr/bin/env bash
# Configures and builds everything (core, runtime, CLI, UI, tests, benchmarks) into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo > build/configure.log 2>&1 || { cat build/configure.log; exit 1; }
cmake --build build -j"$(nproc)"
