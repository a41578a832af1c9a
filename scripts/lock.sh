#!/usr/bin/env bash
# Re-lock: resolve pyproject.toml's extras into hashed requirement files, one per role
# (requirements/serve.txt, train.txt, dev.txt), for CPython 3.11 on every platform.
# Versions already locked are kept (so dvc.lock stays reproducible); --upgrade takes the newest
# versions the ranges allow, after which `dvc repro` must be run and dvc.lock committed.
# tests/unit/test_install.py fails while a lock and pyproject.toml disagree.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/uv ] || .venv/bin/python -m pip install -q uv
for extra in serve train dev; do
  .venv/bin/uv pip compile pyproject.toml --extra "$extra" --universal --python-version 3.11 \
    --generate-hashes --no-header --quiet "$@" -o "requirements/$extra.txt"
done
echo "lock: requirements/serve.txt, train.txt, dev.txt written"
