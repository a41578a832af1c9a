#!/usr/bin/env bash
# Build the service image and probe it with a bundle from a local `dvc repro` mounted at /bundle:
# healthy on /readyz, not root, and a real allocation through the bearer token.
#   bash deploy/smoke.sh [--if-possible]
# Needs a Docker daemon that can pull python:3.11-slim and a bundle. A missing prerequisite is an
# error, or with --if-possible (CI: our machines cannot pull base images) a line saying SKIPPED and
# what was not tested.
set -euo pipefail
cd "$(dirname "$0")/.."
skip() {
  if [ "${1:-}" = "--if-possible" ]; then echo "smoke: SKIPPED: $2; the image was not built or probed"; exit 0; fi
  echo "smoke: $2" >&2; exit 1
}
docker info >/dev/null 2>&1 || skip "${1:-}" "no Docker daemon here"
docker pull -q python:3.11-slim >/dev/null 2>&1 || skip "${1:-}" "the base image python:3.11-slim cannot be pulled here"
[ -f data/policy/policy.json ] || skip "${1:-}" "no bundle: run \`dvc repro\` first (the probe serves its bundle)"
docker build -q -f deploy/Dockerfile -t pond-znuma-serve:smoke . >/dev/null
bundle=$(mktemp -d)
cp -r data/policy/policy.json data/models/li data/models/um data/features/snapshot "$bundle"/
chmod -R a+rX "$bundle"
token=$(python3 -c "import secrets; print(secrets.token_hex(16))")
cid=$(docker run -d -p 127.0.0.1::8000 -e POND_API_TOKEN="$token" -v "$bundle":/bundle:ro pond-znuma-serve:smoke)
trap 'docker rm -f "$cid" >/dev/null; rm -rf "$bundle"' EXIT
port=$(docker port "$cid" 8000 | head -1 | cut -d: -f2)
for _ in $(seq 60); do
  [ "$(docker inspect -f '{{.State.Health.Status}}' "$cid")" = healthy ] && break; sleep 2
done
[ "$(docker inspect -f '{{.State.Health.Status}}' "$cid")" = healthy ] || { docker logs "$cid"; echo "smoke: unhealthy" >&2; exit 1; }
[ "$(docker exec "$cid" id -u)" != 0 ] || { echo "smoke: the service runs as root" >&2; exit 1; }
body='{"vm_id":"smoke-1","customer_id":"c","vm_type":"Standard_D4s_v3","vcpus":4,"memory_gb":16,"os":"linux","region":"eastus"}'
curl -fsS -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -d "$body" \
  "http://127.0.0.1:$port/v1/allocations" | python3 -c "import json,sys; a=json.load(sys.stdin); assert a['local_gb']+a['pool_gb']==16; print('smoke: ok', a['decision'], a['model_version'])"
