#!/usr/bin/env bash
# Set up, then run every test (slow ones included: CI runs them too), in POND_TEST_WORKERS processes
# (default 2, the cores of our CI machines; 0 runs them in this process). Each test file stays in one
# process (--dist loadfile), so a file's module fixtures are built once.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
python -m pytest -q -n "${POND_TEST_WORKERS:-2}" --dist loadfile "$@"
