#!/usr/bin/env bash
# Set up, then run every test (slow ones included: CI runs them too).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
python -m pytest -q "$@"
