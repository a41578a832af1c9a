#!/usr/bin/env bash
# Create .venv (once) and install the project with its test dependencies. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi
.venv/bin/python -m pip install -q -e ".[dev]" 2>&1 | grep -v -E "^(WARNING: Location|  )" || true
.venv/bin/python -c "import telemetry, features, duckdb, sklearn, lightgbm, onnxruntime, mlflow, fastapi" \
  || { echo "setup: installation failed" >&2; exit 1; }
