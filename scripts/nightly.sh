#!/usr/bin/env bash
# The nightly job on a provider's telemetry, for a timer (deploy/systemd/) or cron:
#   scripts/nightly.sh [--as-of YYYY-MM-DD] [--import DIR] [--push]
# --as-of: the night's day (default: yesterday, UTC): written to params.yaml's base.as_of by
#   `dvc exp run --set-param`, so the run is recorded with it; params.yaml then holds that day (the
#   script says so) and dvc.lock the night's outputs, ready to commit.
# --import DIR: `pond import DIR` first (the day's export of the contract tables; a folder or a storage URL, s3://...).
# --push: `dvc push` the night's outputs to the default DVC remote afterwards.
# Exit 75 (and nothing done) while another night runs in this checkout.
# Tracking and registry: MLFLOW_TRACKING_URI (e.g. http://mlflow:5000), else the local SQLite store.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
as_of=$(date -u -d yesterday +%F)
import_dir=""
push=0
while [ $# -gt 0 ]; do
  case "$1" in
    --as-of) as_of=$2; shift 2 ;;
    --import) import_dir=$2; shift 2 ;;
    --push) push=1; shift ;;
    *) echo "nightly: unknown argument $1 (use --as-of DAY, --import DIR, --push)" >&2; exit 2 ;;
  esac
done
[[ "$as_of" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}$ ]] || { echo "nightly: --as-of takes YYYY-MM-DD, got $as_of" >&2; exit 2; }
# One night at a time: from cron, a night still running when the next starts would have its data/raw replaced by
# the next import under its stages (DVC's own lock comes only after the import). systemd never overlaps a oneshot.
command -v flock >/dev/null || { echo "nightly: needs flock (util-linux: apt-get install util-linux)" >&2; exit 2; }
mkdir -p .dvc/tmp
exec 9>.dvc/tmp/nightly.lock
flock -n 9 || { echo "nightly: another night is still running in $PWD (it holds .dvc/tmp/nightly.lock); this one" \
  "does nothing: run it again once that one ends" >&2; exit 75; }
echo "nightly: $(date -u +%FT%TZ) night $as_of"
[ -z "$import_dir" ] || pond import "$import_dir"
dvc exp run --set-param "base.as_of=$as_of"
echo "nightly: params.yaml now holds base.as_of: $as_of (dvc exp run --set-param); commit it with dvc.lock"
[ "$push" = 0 ] || dvc push
pond report
