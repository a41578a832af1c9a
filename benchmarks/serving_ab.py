"""The service of this checkout against the service of commit REV, in alternating rounds (after `dvc repro`):

    python -m benchmarks.serving_ab REV [--rounds 4] [--duration 10]

Backs the claim that a change of structure changes no serving figure (the service split into routers,
dependencies and middleware). One run of ``benchmarks.serving`` per commit is not enough for that: on this 2-core
machine one target's rounds spread by 20% or more from one minute to the next. Here both services run at once
(1 worker each, the same bundle: REV's code is a git worktree whose ``data/`` links to this checkout's), and wrk
loads them in turn: the single route (16 connections, the next day's requests), and the batch of 1,000 VMs as JSON
and as an Arrow IPC stream (2 connections each). Printed: requests or decisions per second and p99 of every round,
and the mean of each. The first round is each service's first traffic after its start, as after a deploy.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.serving import ARROW, ROOT, arrow_body, free_port, load_files, load_json, next_day_requests

DATA = ("policy", "features", "raw", "mlflow", "models/li", "models/um")


def _worktree(rev: str, where: Path) -> str:
    """REV checked out at ``where``, its data folders linked to this checkout's; the PYTHONPATH that imports it."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(where / "code"), rev], check=True)
    for d in DATA:
        (where / "code" / "data" / d).parent.mkdir(parents=True, exist_ok=True)
        (where / "code" / "data" / d).symlink_to(ROOT / "data" / d)
    (where / "shim").mkdir()
    (where / "shim" / "pond").symlink_to(where / "code", target_is_directory=True)   # `pond.*` from REV's folders
    return os.pathsep.join([str(where / "shim"), str(where / "code")])


def _serve(cwd: Path, pythonpath: str | None) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "POND_RELOAD_INTERVAL_S": "0"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    proc = subprocess.Popen([sys.executable, "-m", "pond.pipelines", "serve", "--workers", "1", "--port", str(port)],
                            cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(360):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                time.sleep(1.0)
                return proc, f"http://127.0.0.1:{port}"
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            raise SystemExit(f"the service in {cwd} exited before it was ready")
        time.sleep(0.5)
    proc.kill()
    raise SystemExit(f"the service in {cwd} was not ready after 180 s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("rev", help="the commit to compare with (for example the one before a refactor)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--duration", type=float, default=10)
    args = ap.parse_args()
    vms = next_day_requests()
    bodies = [json.dumps({**r, "vcpus": int(r["vcpus"])}) for r in vms.where(vms.notna(), None).to_dict("records")]
    batches = [json.dumps({"requests": [json.loads(b) for b in bodies[i:i + 1000]]})
               for i in range(0, len(bodies) - 999, 1000)]
    arrows = [arrow_body(vms.iloc[i:i + 1000]) for i in range(0, len(vms) - 999, 1000)]
    with tempfile.TemporaryDirectory() as tmp:
        servers = {}
        try:
            servers[args.rev] = _serve(Path(tmp) / "code", _worktree(args.rev, Path(tmp)))
            servers["checkout"] = _serve(ROOT, None)
            runs: dict[str, list[float]] = {}
            for _ in range(args.rounds):
                for name, (_, url) in servers.items():
                    single = load_json(url + "/v1/allocations", bodies, 16, args.duration)
                    batch = load_json(url + "/v1/allocations/batch", batches, 2, args.duration)
                    arrow = load_files(url + "/v1/allocations/batch", ARROW, arrows, 2, args.duration)
                    row = {"single req/s": single["throughput_rps"], "single p99 ms": single["p99_ms"],
                           "batch decisions/s": round(batch["throughput_rps"] * 1000), "batch p99 ms": batch["p99_ms"],
                           "arrow decisions/s": round(arrow["throughput_rps"] * 1000), "arrow p99 ms": arrow["p99_ms"]}
                    for k, v in row.items():
                        runs.setdefault(f"{name} {k}", []).append(v)
                    print(json.dumps({name: row}), flush=True)
        finally:
            for proc, _ in servers.values():
                proc.terminate()
                proc.wait(timeout=30)
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(Path(tmp) / "code")],
                           check=False, capture_output=True)
    print(json.dumps({k: {"rounds": v, "mean": round(sum(v) / len(v), 1)} for k, v in runs.items()}, indent=1))


if __name__ == "__main__":
    main()
