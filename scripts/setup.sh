#!/usr/bin/env bash
# Create .venv (once) and install the project from the hashed lock of one role. Idempotent.
#   POND_ROLE=dev (default: pipeline + service + tests) | train (pipeline + service) | serve (service only)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
ROLE=${POND_ROLE:-dev}
[ -f "requirements/$ROLE.txt" ] || { echo "setup: no lock requirements/$ROLE.txt (POND_ROLE is serve, train or dev)" >&2; exit 1; }
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi
quiet() { grep -v -E "^(WARNING: Location|  )" || true; }
# --no-compile: a module is byte-compiled when first imported (the venv is writable), not every module of the lock at
# install: a fresh dev install took 136 s so, 250 s compiling everything (2 cores, 2026-12-02)
.venv/bin/python -m pip install -q --no-compile --require-hashes -r "requirements/$ROLE.txt" 2>&1 | quiet
.venv/bin/python -m pip install -q --no-compile --no-deps -e . 2>&1 | quiet
# numba's compiled-function cache is keyed by source file, not module name: a cache written before the folders moved
# under the `pond` import root would import the old names. It is rebuilt on first use (seconds).
find core telemetry features models serving optimize evaluation pipelines -name '*.nb[ic]' -delete
case "$ROLE" in
  serve) check="pond.serving.app, onnxruntime, fastapi" ;;
  *) check="pond.telemetry, pond.features, duckdb, sklearn, lightgbm, onnxruntime, mlflow, fastapi" ;;
esac
.venv/bin/python -c "import $check" || { echo "setup: installation failed" >&2; exit 1; }
