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
# --no-compile: pip compiles one file at a time (a fresh dev install took 136 s so, 250 s with pip compiling, 2 cores,
# 2026-12-02); the venv is byte-compiled below, on every core, once per lock.
.venv/bin/python -m pip install -q --no-compile --require-hashes -r "requirements/$ROLE.txt" 2>&1 | quiet
.venv/bin/python -m pip install -q --no-compile --no-deps -e . 2>&1 | quiet
# Where PYTHONDONTWRITEBYTECODE is set (our CI machines set it) an import never writes its .pyc, so every process
# compiled sklearn, pandas, mlflow... from source again: 20 of `pond train_li`'s 43 s on the template's fleet
# (2026-12-03). compileall writes them whatever that variable says; the packages' own test folders are skipped. A
# file it cannot compile is only compiled when imported, as before: its complaints are not setup's failure.
stamp=".venv/.compiled-$ROLE-$(sha256sum "requirements/$ROLE.txt" | cut -c1-16)"
if [ ! -e "$stamp" ]; then
  .venv/bin/python -m compileall -q -j 0 -x '/tests?/' .venv/lib/python*/site-packages >/dev/null 2>&1 || true
  touch "$stamp"
fi
.venv/bin/python -m compileall -q -j 0 core telemetry features models serving optimize evaluation pipelines simulator \
  >/dev/null 2>&1 || true
# numba's compiled-function cache is keyed by source file, not module name: a cache written before the folders moved
# under the `pond` import root would import the old names. It is rebuilt on first use (seconds).
find core telemetry features models serving optimize evaluation pipelines -name '*.nb[ic]' -delete
case "$ROLE" in
  serve) check="pond.serving.app, onnxruntime, fastapi" ;;
  *) check="pond.telemetry, pond.features, duckdb, sklearn, lightgbm, onnxruntime, mlflow, fastapi" ;;
esac
.venv/bin/python -c "import $check" || { echo "setup: installation failed" >&2; exit 1; }
