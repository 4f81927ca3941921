#!/usr/bin/env bash
# The main job: installs what is missing, builds, records a real 2-rank DDP run and opens it in
# lockstep-ui. Without a display, it renders the timeline to runs/demo.png instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
mkdir -p runs
./build/app/lockstep run --nproc 2 --model mlp --layers 8 --width 512 --batch 32 --steps 12 \
  --bucket-mb 1 --out runs/demo.db --force
./build/app/lockstep report runs/demo.db
if [ -n "${DISPLAY:-}" ] || [ -n "${WAYLAND_DISPLAY:-}" ]; then
  exec ./build/app/lockstep-ui runs/demo.db
else
  ./build/app/lockstep-ui --screenshot runs/demo.png --view timeline runs/demo.db
  echo "No display: the timeline of runs/demo.db was rendered to runs/demo.png."
  echo "On a desktop, open it with: ./build/app/lockstep-ui runs/demo.db"
fi
