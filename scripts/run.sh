#!/usr/bin/env bash
# The main job on the built-in fleet: set up, run the DVC pipeline (the nightly `dvc repro`), show
# its headline figures (pond report), then start the service on localhost (POND_PORT, default 8000; Ctrl-C stops it).
# `bash scripts/run.sh --no-serve` stops after the pipeline.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
[ -d .git ] || git init -q
serve=1
args=()
for a in "$@"; do
  if [ "$a" = "--no-serve" ]; then serve=0; else args+=("$a"); fi
done
dvc repro "${args[@]}"
pond report                 # tonight's headline figures; Markdown in reports/tonight.md (all metrics: dvc metrics show)
if [ "$serve" = 1 ]; then
  echo "serving tonight's bundle on http://127.0.0.1:${POND_PORT:-8000} (try /readyz, /docs)"
  exec pond serve --host 127.0.0.1
fi
