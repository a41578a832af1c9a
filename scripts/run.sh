#!/usr/bin/env bash
# The main job on the built-in fleet: set up, then run the DVC pipeline (the nightly `dvc repro`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
[ -d .git ] || git init -q
dvc repro "$@"
dvc metrics show
