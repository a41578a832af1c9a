#!/usr/bin/env bash
# Set up, then run every test (slow ones included: CI runs them too), in POND_TEST_WORKERS processes
# (default 2, the cores of our CI machines; 0 runs them in this process). Each test file stays in one
# process (--dist loadfile), so a file's module fixtures are built once.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
# The test processes already fill the cores: joblib's own workers inside each (scikit-learn's n_jobs=-1, the
# LI selection's outer halves) would only oversubscribe them, and spawning them costs seconds a stage.
if [ "${POND_TEST_WORKERS:-2}" -gt 1 ]; then export LOKY_MAX_CPU_COUNT="${LOKY_MAX_CPU_COUNT:-1}"; fi
python -m pytest -q -n "${POND_TEST_WORKERS:-2}" --dist loadfile "$@"
