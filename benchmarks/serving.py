"""Serving figures on this machine (issue 6), after `dvc repro`:

    python benchmarks/serving.py [--duration 20] [--connections 16]

1. In process: one VM per call through ``Engine.allocate`` (enrich, UM model, decision; the LI
   score is a per-key lookup computed by the forest at load), p50/p99 over 5,000 calls; and what
   one forest run per request would add instead (p50/p99 of the ONNX forest on one history row).
2. In process, batch: 100,000 requests in one call -> decisions/s.
3. HTTP: `pond serve` (one uvicorn worker) under 16 keep-alive connections on /v1/allocations, and
   batches of 1,000 on /v1/allocations/batch.
4. The peer: `mlflow models serve` of the same RandomForest (the r1.82/PDM 5 forest logged by
   train_li, skops) under the same load on /invocations, one row per request; the ratio.

The load generator (benchmarks/loadgen.py) runs in its own process beside the server.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from features.history import KEY  # noqa: E402
from models.bundle import REQUEST_COLUMNS, BundlePaths  # noqa: E402
from serving.engine import Engine  # noqa: E402
from serving.offline import request_columns  # noqa: E402

PATHS = BundlePaths(ROOT / "data/policy/policy.json", ROOT / "data/models/li", ROOT / "data/models/um",
                    ROOT / "data/features/snapshot")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pct(x: list[float]) -> dict[str, float]:
    a = np.array(x) * 1e6
    return {"p50_us": round(float(np.percentile(a, 50)), 1), "p99_us": round(float(np.percentile(a, 99)), 1)}


def _requests() -> pd.DataFrame:
    vmf = pd.read_parquet(ROOT / "data/features/vm_features.parquet")
    policy = json.loads(PATHS.policy.read_text())
    day = (pd.Timestamp(policy["as_of"]) + pd.Timedelta(days=1)).date()
    return vmf[vmf.day == day][[*REQUEST_COLUMNS, "cluster_id"]].reset_index(drop=True)


def in_process(engine: Engine, vms: pd.DataFrame) -> dict:
    cols = request_columns(vms)
    n = len(vms)
    one = [{k: (v[i:i + 1] if v is not None else None) for k, v in cols.items()} for i in range(min(n, 5000))]
    for c in one[:500]:
        engine.allocate(c)
    times = []
    for c in one:
        t = time.perf_counter()
        engine.allocate(c)
        times.append(time.perf_counter() - t)
    history = pd.read_parquet(PATHS.snapshot_dir / "workload_history.parquet")
    X = history.reindex(columns=engine.models.li_features).to_numpy(np.float32)
    li = []
    for i in range(min(len(X), 2000)):
        t = time.perf_counter()
        engine.models.li.run(["probabilities"], {"X": X[i:i + 1]})
        li.append(time.perf_counter() - t)
    reps = int(np.ceil(100_000 / n))
    big = request_columns(pd.concat([vms] * reps, ignore_index=True).head(100_000))
    engine.allocate(big)
    t = time.perf_counter()
    engine.allocate(big)
    batch_s = time.perf_counter() - t
    return {"single_vm": {**_pct(times), "calls": len(times), "target_p99_us": 100},
            "li_forest_per_request_if_not_cached": _pct(li),
            "batch": {"vms": 100_000, "seconds": round(batch_s, 3),
                      "decisions_per_s": round(100_000 / batch_s), "target_decisions_per_s": 100_000}}


def _start(cmd: list[str], env: dict, ready_url: str, timeout: float = 180) -> subprocess.Popen:
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if httpx.get(ready_url, timeout=2).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"{cmd[0:4]} exited: {proc.stderr.read()[-2000:]}")
        time.sleep(0.5)
    proc.kill()
    raise RuntimeError(f"{cmd[0:4]} not ready after {timeout} s")


def _load(url: str, bodies: list[str], connections: int, duration: float) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as fh:
        fh.write("\n".join(bodies))
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks/loadgen.py"), url, fh.name, "-c", str(connections),
                          "-d", str(duration)], capture_output=True, text=True, check=True)
    os.unlink(fh.name)
    return json.loads(res.stdout)


def _latest_forest_uri(tracking_uri: str, name: str) -> str:
    import mlflow
    mlflow.set_tracking_uri(tracking_uri)
    exp = mlflow.get_experiment_by_name("pond")
    models = mlflow.search_logged_models(experiment_ids=[exp.experiment_id], filter_string=f"name = '{name}'",
                                         order_by=[{"field_name": "creation_time", "ascending": False}],
                                         max_results=1, output_format="list")
    if not models:
        raise RuntimeError(f"no logged model {name!r} in {tracking_uri}: run `dvc repro` first")
    return f"models:/{models[0].model_id}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=20)
    ap.add_argument("--connections", type=int, default=16)
    args = ap.parse_args()
    engine = Engine.load(PATHS)
    vms = _requests()
    out: dict = {"cores": os.cpu_count(), "model_version": engine.version, "in_process": in_process(engine, vms)}
    print(json.dumps({"in_process": out["in_process"]}), flush=True)

    env = {**os.environ, "POND_RELOAD_INTERVAL_S": "0", "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    port = _free_port()
    server = _start([sys.executable, "-m", "pipelines", "serve", "--port", str(port)], env,
                    f"http://127.0.0.1:{port}/readyz")
    try:
        reqs = vms.where(vms.notna(), None).to_dict("records")
        bodies = [json.dumps({**r, "vcpus": int(r["vcpus"])}) for r in reqs]
        out["pond_http"] = _load(f"http://127.0.0.1:{port}/v1/allocations", bodies, args.connections, args.duration)
        print(json.dumps({"pond_http": out["pond_http"]}), flush=True)
        batches = [json.dumps({"requests": [json.loads(b) for b in bodies[i:i + 1000]]})
                   for i in range(0, len(bodies) - 999, 1000)]
        b = _load(f"http://127.0.0.1:{port}/v1/allocations/batch", batches, 2, args.duration)
        b["vm_decisions_per_s"] = round(b["throughput_rps"] * 1000)
        out["pond_http_batch_1000"] = b
        print(json.dumps({"pond_http_batch_1000": b}), flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)

    tracking = os.environ.get("MLFLOW_TRACKING_URI", f"sqlite:///{ROOT / 'data/mlflow/mlflow.db'}")
    policy = json.loads(PATHS.policy.read_text())
    uri = _latest_forest_uri(tracking, "li_" + Path(policy["li"]["model"]).stem.replace(".", "_"))
    history = pd.read_parquet(PATHS.snapshot_dir / "workload_history.parquet")
    rows = vms[list(KEY)].merge(history, on=list(KEY)).reindex(columns=policy["li"]["features"])
    port = _free_port()
    peer = _start([sys.executable, "-m", "mlflow", "models", "serve", "-m", uri, "--env-manager", "local",
                   "-p", str(port), "-w", "1"], {**env, "MLFLOW_TRACKING_URI": tracking},
                  f"http://127.0.0.1:{port}/ping")
    try:
        cols = list(rows.columns)
        data = rows.astype(float).to_numpy()
        bodies = [json.dumps({"dataframe_split": {"columns": cols, "data": [[None if np.isnan(v) else float(v)
                                                                             for v in data[i]]]}})
                  for i in range(min(len(rows), 1000))]
        out["mlflow_models_serve"] = {"model": uri, **_load(f"http://127.0.0.1:{port}/invocations", bodies,
                                                            args.connections, args.duration)}
    finally:
        peer.terminate()
        peer.wait(timeout=30)
    p, m = out["pond_http"], out["mlflow_models_serve"]
    out["throughput_ratio_pond_over_mlflow"] = round(p["throughput_rps"] / max(m["throughput_rps"], 1e-9), 1)
    out["targets"] = {"ratio": 20, "pond_http_p99_ms": 10}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
