#!/usr/bin/env bash
# docs/your-telemetry.md, "Step by step", with the default params, timed: in a copy of the
# repository (tracked files only) under a temporary directory, so this checkout is left as it is.
#   bash benchmarks/byo_walkthrough.sh            (after `bash scripts/setup.sh`)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/.venv/bin/activate"
WORK=$(mktemp -d /tmp/pond-byo-XXXXXX)
cd "$ROOT" && git ls-files -z | xargs -0 -I{} cp --parents {} "$WORK" && rm -f "$WORK/dvc.lock"
cd "$WORK" && git init -q
export MLFLOW_TRACKING_URI="sqlite:///$WORK/mlflow.db"
start=$(date +%s)
pond template my-telemetry > /dev/null
pond validate my-telemetry || true                     # blocked: base.as_of; it names the days that fit
python - <<'PY'
import yaml
p = yaml.safe_load(open("params.yaml"))
p["base"]["as_of"] = "2026-01-20"                      # the last day `pond validate` named
open("params.yaml", "w").write(yaml.safe_dump(p, sort_keys=False))
d = yaml.safe_load(open("dvc.yaml"))
d["stages"]["generate"] = {"cmd": "pond import my-telemetry --out data/raw", "deps": ["my-telemetry"],
                           "outs": ["data/raw"]}
open("dvc.yaml", "w").write(yaml.safe_dump(d, sort_keys=False))
PY
pond validate my-telemetry > /dev/null
t1=$(date +%s)
dvc repro > "$WORK/repro.log" 2>&1
t2=$(date +%s)
echo "{\"template_and_validate_s\": $((t1 - start)), \"dvc_repro_s\": $((t2 - t1)), \"work_dir\": \"$WORK\"}"
