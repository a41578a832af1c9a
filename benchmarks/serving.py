"""Serving figures on this machine, after `dvc repro`:

    python -m benchmarks.serving [--duration 12] [--connections 16] [--rounds 3] [--in-process-only]

1. In process: the next day's requests one VM per call through ``Engine.allocate_one``, in arrival
   order (enrichment, both models' scores, the decision; P(insensitive) per history key and the
   UM prediction per recent request shape are computed at load). Reported: p50/p99 over the day,
   the share of requests served from the UM cache, p50/p99 of those that ran the UM model, the
   same day with the cache emptied before every call, and what one forest run per request would
   cost. Beside them, the machine's own tail: plain Python work of the same p50 length.
2. In process, batch: 100,000 requests in one call to ``Engine.allocate`` -> decisions/s.
3. HTTP, every target under the same load from wrk (a standard load generator; the benchmark
   installs Debian's `wrk` when it is missing and it may): ``--connections`` keep-alive connections,
   2 wrk threads, ``--duration`` seconds each, one target after another on this machine:
   - the ceiling: a bare Starlette route echoing its body (benchmarks/echo_app.py), same uvicorn
     (httptools); beside it the same echo on `pond serve`'s protocol (serving/protocol.py: one write
     per response), to show what the protocol alone gives;
   - `pond serve` with 1 worker on /v1/allocations, one VM per request: the two echoes and it are
     loaded in ``--rounds`` alternating rounds, and each reports its median round;
   - `pond serve` with 2 workers on /v1/allocations, and with 1 and 2 workers
     /v1/allocations/batch with 1,000 VMs per request (2 connections), as JSON and as an Arrow
     IPC stream;
   - the peer: `mlflow models serve` of the same RandomForest (the r1.82/PDM 5 forest logged by
     train_li) on /invocations, one row per request.
   Reported: requests/s, p50/p99 as wrk measures them, non-2xx and socket errors, and the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import pandas as pd

from pond.models.bundle import BundlePaths
from pond.models.policy import read_policy
from pond.serving.columnar import ARROW_STREAM
from pond.serving.engine import Engine
from pond.serving.offline import request_columns, time_one_by_one
from pond.serving.protocol import PROTOCOL
from pond.telemetry.request import FIELDS as REQUEST_FIELDS
from pond.telemetry.request import HISTORY_KEY as KEY

ROOT = Path(__file__).resolve().parents[1]

PATHS = BundlePaths(ROOT / "data/policy/policy.json", ROOT / "data/models/li", ROOT / "data/models/um",
                    ROOT / "data/features/snapshot")

ARROW = ARROW_STREAM.decode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pct(x: list[float]) -> dict[str, float]:
    a = np.array(x) * 1e6
    return {"p50_us": round(float(np.percentile(a, 50)), 1), "p99_us": round(float(np.percentile(a, 99)), 1)}


def next_day_requests(day_offset: int = 1) -> pd.DataFrame:
    """Request columns of the VMs created on as-of + ``day_offset``, in arrival order."""
    vmf = pd.read_parquet(ROOT / "data/features/vm_features.parquet")
    policy = read_policy(PATHS.policy)
    day = (pd.Timestamp(policy.as_of) + pd.Timedelta(days=day_offset)).date()
    vmf = vmf[vmf.day == day].sort_values("created_at", kind="stable")
    return vmf[list(REQUEST_FIELDS)].reset_index(drop=True)


def _busy(n: int) -> int:
    s = 0
    for i in range(n):
        s += i
    return s


def machine_floor(p50_us: float, calls: int = 5000) -> dict:
    """p50/p99 of plain Python work calibrated to take ``p50_us``: the tail this machine adds to any
    call of that length (timer ticks, the hypervisor), whatever the call does."""
    n = 1000
    for _ in range(3):   # rescale until the loop's median is the call's p50
        trial = []
        for _ in range(201):
            t = time.perf_counter()
            _busy(n)
            trial.append(time.perf_counter() - t)
        n = max(1, round(n * p50_us * 1e-6 / float(np.median(trial))))
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        _busy(n)
        times.append(time.perf_counter() - t)
    return _pct(times)


def in_process(engine: Engine, vms: pd.DataFrame, repeats: int = 3) -> dict:
    """The next day's requests one at a time, in arrival order, from the cache state the service
    starts the day with (the snapshot's request shapes); repeated, the run with the median p99 kept."""
    cols = request_columns(vms)
    time_one_by_one(engine, request_columns(next_day_requests(day_offset=0).head(1000)), None)   # warm, on the as-of day
    start = dict(engine.um_cache)
    runs = sorted((time_one_by_one(engine, cols, start) for _ in range(repeats)), key=lambda r: _pct(r[0])["p99_us"])
    times, ran = runs[len(runs) // 2]
    miss = [t for t, m in zip(times, ran) if m]
    uncached = sorted((time_one_by_one(engine, cols, None)[0] for _ in range(repeats)),
                      key=lambda t: _pct(t)["p99_us"])
    uncached_times = uncached[len(uncached) // 2]
    history = pd.read_parquet(PATHS.snapshot_dir / "workload_history.parquet")
    X = history.reindex(columns=engine.models.li_features).to_numpy(np.float32)
    forest = []
    for i in range(min(len(X), 2000)):
        t = time.perf_counter()
        engine.models.li.run(["probabilities"], {"X": X[i:i + 1]})
        forest.append(time.perf_counter() - t)
    reps = int(np.ceil(100_000 / len(vms)))
    big = request_columns(pd.concat([vms] * reps, ignore_index=True).head(100_000))
    engine.allocate(big)
    t = time.perf_counter()
    engine.allocate(big)
    batch_s = time.perf_counter() - t
    return {"single_vm": {**_pct(times), "calls": len(times), "um_cache_hit_share": round(1 - len(miss) / len(times), 3),
                          "prefilled_shapes": engine.info.get("prefilled_shapes", 0), "target_p99_us": 100},
            "single_vm_um_run_in_request": {**_pct(miss), "calls": len(miss)},
            "single_vm_no_cache": {**_pct(uncached_times), "calls": len(uncached_times)},
            "li_forest_per_request_if_not_precomputed": _pct(forest),
            "machine_floor_python_loop": machine_floor(_pct(uncached_times)["p50_us"]),
            "batch": {"vms": 100_000, "seconds": round(batch_s, 3),
                      "decisions_per_s": round(100_000 / batch_s), "target_decisions_per_s": 100_000}}


def start_server(cmd: list[str], env: dict, ready_url: str, timeout: float = 180) -> subprocess.Popen:
    """``cmd`` run from the repository with ``env``, returned once ``ready_url`` answers 200 (and its workers are
    warm); its log goes to a temp file, whose end a failure quotes."""
    log = tempfile.TemporaryFile("w+")   # noqa: SIM115  the server's log, read until it stops
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if httpx.get(ready_url, timeout=2).status_code == 200:
                time.sleep(3.0 if "--workers" in cmd else 0.5)   # every worker warmed
                return proc
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"{cmd[0:4]} exited: {log.read()[-2000:]}")
        time.sleep(0.5)
    proc.kill()
    raise RuntimeError(f"{cmd[0:4]} not ready after {timeout} s")


def _wrk_binary() -> str:
    """Debian's wrk, installed here when missing (as root with apt), else a clear message."""
    found = shutil.which("wrk")
    if found is None and shutil.which("apt-get") and os.geteuid() == 0:
        subprocess.run(["apt-get", "install", "-y", "-q", "wrk"], check=False, capture_output=True)
        found = shutil.which("wrk")
    if found is None:
        raise SystemExit("benchmarks/serving.py: wrk is not installed: `apt-get install wrk` (Debian/Ubuntu) "
                         "or `brew install wrk`, then run again (or pass --in-process-only)")
    return found


def _wrk(url: str, connections: int, duration: float, content_type: str, files: list[str]) -> dict:
    """wrk against ``url`` with benchmarks/wrk/bodies.lua (bodies round-robin)."""
    res = subprocess.run([_wrk_binary(), "-t", str(min(2, connections)), "-c", str(connections),
                          "-d", f"{duration:g}s", "--timeout", "10s", "-s", str(ROOT / "benchmarks/wrk/bodies.lua"),
                          url, "--", content_type, *files], capture_output=True, text=True, check=True)
    r = json.loads(res.stdout.strip().splitlines()[-1])
    return {"throughput_rps": round(r["requests"] / (r["duration_us"] / 1e6), 1),
            "p50_ms": round(r["p50_us"] / 1e3, 3), "p99_ms": round(r["p99_us"] / 1e3, 3),
            "requests": r["requests"], "non_2xx": r["non_2xx"], "socket_errors": r["socket_errors"],
            "connections": connections, "seconds": duration}


def load_json(url: str, bodies: list[str], connections: int, duration: float) -> dict:
    """wrk against ``url``, JSON bodies one per line of a file."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as fh:
        fh.write("\n".join(bodies))
    try:
        return _wrk(url, connections, duration, "application/json", [fh.name])
    finally:
        os.unlink(fh.name)


def load_files(url: str, content_type: str, bodies: list[bytes], connections: int, duration: float) -> dict:
    """wrk against ``url``, binary bodies one per file."""
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for k, body in enumerate(bodies):
            paths.append(str(Path(d) / f"{k}.bin"))
            Path(paths[-1]).write_bytes(body)
        return _wrk(url, connections, duration, content_type, paths)


def arrow_body(vms: pd.DataFrame) -> bytes:
    """Request columns as the Arrow IPC stream ``/v1/allocations/batch`` takes (serving/columnar.py)."""
    import pyarrow as pa

    table = pa.Table.from_pandas(vms.assign(vcpus=vms.vcpus.astype("int64")), preserve_index=False)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


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
    ap.add_argument("--duration", type=float, default=12)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds of the echoes and the single route")
    ap.add_argument("--in-process-only", action="store_true", help="skip the HTTP and MLflow measurements")
    args = ap.parse_args()
    engine = Engine.load(PATHS)
    vms = next_day_requests()
    out: dict = {"cores": os.cpu_count(), "model_version": engine.version, "in_process": in_process(engine, vms)}
    print(json.dumps({"in_process": out["in_process"]}), flush=True)
    if args.in_process_only:
        return

    env = {**os.environ, "POND_RELOAD_INTERVAL_S": "0", "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    reqs = vms.where(vms.notna(), None).to_dict("records")
    bodies = [json.dumps({**r, "vcpus": int(r["vcpus"])}) for r in reqs]
    batches = [json.dumps({"requests": [json.loads(b) for b in bodies[i:i + 1000]]})
               for i in range(0, len(bodies) - 999, 1000)]
    arrow = [arrow_body(vms.iloc[i:i + 1000]) for i in range(0, len(vms) - 999, 1000)]
    servers: dict[str, subprocess.Popen] = {}

    def start(name: str, cmd: list[str], ready: str) -> str:
        port = free_port()
        servers[name] = start_server([*cmd, "--port", str(port)], env, f"http://127.0.0.1:{port}{ready}")
        return f"http://127.0.0.1:{port}"

    def stop(name: str) -> None:
        servers[name].terminate()
        servers[name].wait(timeout=30)

    uvicorn_echo = [sys.executable, "-m", "uvicorn", "benchmarks.echo_app:app", "--no-access-log", "--log-level",
                    "warning", "--http"]
    pond = [sys.executable, "-m", "pond.pipelines", "serve", "--workers"]
    try:
        urls = {"echo_ceiling": start("echo_ceiling", [*uvicorn_echo, "httptools"], "/ping") + "/echo",
                "echo_pond_protocol": start("echo_pond_protocol", [*uvicorn_echo, PROTOCOL], "/ping") + "/echo"}
        base = {1: start("pond_1w", [*pond, "1"], "/readyz")}
        urls["pond_http_1w"] = base[1] + "/v1/allocations"
        rounds: dict[str, list[dict]] = {name: [] for name in urls}
        for _ in range(args.rounds):     # alternating, so that a slow minute of the machine hits every target
            for name, url in urls.items():
                rounds[name].append(load_json(url, bodies, args.connections, args.duration))
        for name, runs in rounds.items():
            median = sorted(runs, key=lambda r: r["throughput_rps"])[len(runs) // 2]   # the median round
            out[name] = {**median, "rounds_rps": [r["throughput_rps"] for r in runs]}
            print(json.dumps({name: out[name]}), flush=True)
        stop("echo_ceiling")
        stop("echo_pond_protocol")
        for workers in (1, 2):
            if workers == 2:
                stop("pond_1w")
                base[2] = start("pond_2w", [*pond, "2"], "/readyz")
                out["pond_http_2w"] = load_json(base[2] + "/v1/allocations", bodies, args.connections, args.duration)
            url = base[workers] + "/v1/allocations/batch"
            for fmt, load in (("json", lambda url=url: load_json(url, batches, 2, args.duration)),
                              ("arrow", lambda url=url: load_files(url, ARROW, arrow, 2, args.duration))):
                b = load()
                b["vm_decisions_per_s"] = round(b["throughput_rps"] * 1000)
                out[f"pond_http_batch_1000_{fmt}_{workers}w"] = b
                print(json.dumps({f"pond_http_batch_1000_{fmt}_{workers}w": b}), flush=True)
        stop("pond_2w")
    finally:
        for proc in servers.values():
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)

    tracking = os.environ.get("MLFLOW_TRACKING_URI", f"sqlite:///{ROOT / 'data/mlflow/mlflow.db'}")
    policy = read_policy(PATHS.policy)
    uri = _latest_forest_uri(tracking, "li_" + Path(policy.li.model).stem.replace(".", "_"))
    history = pd.read_parquet(PATHS.snapshot_dir / "workload_history.parquet")
    rows = vms[list(KEY)].merge(history, on=list(KEY)).reindex(columns=policy.li.features)
    port = free_port()
    peer = start_server([sys.executable, "-m", "mlflow", "models", "serve", "-m", uri, "--env-manager", "local",
                         "-p", str(port), "-w", "1"], {**env, "MLFLOW_TRACKING_URI": tracking},
                        f"http://127.0.0.1:{port}/ping")
    try:
        cols = list(rows.columns)
        data = rows.astype(float).to_numpy()
        bodies = [json.dumps({"dataframe_split": {"columns": cols, "data": [[None if np.isnan(v) else float(v)
                                                                             for v in data[i]]]}})
                  for i in range(min(len(rows), 1000))]
        out["mlflow_models_serve"] = {"model": uri, **load_json(f"http://127.0.0.1:{port}/invocations", bodies,
                                                            args.connections, args.duration)}
    finally:
        peer.terminate()
        peer.wait(timeout=30)
    p, m, e = out["pond_http_1w"], out["mlflow_models_serve"], out["echo_ceiling"]
    out["ratios"] = {
        "pond_1w_over_echo": round(p["throughput_rps"] / e["throughput_rps"], 3),
        "pond_1w_over_echo_pond_protocol": round(p["throughput_rps"] / out["echo_pond_protocol"]["throughput_rps"], 3),
        "pond_2w_over_1w": round(out["pond_http_2w"]["throughput_rps"] / p["throughput_rps"], 3),
        "pond_1w_over_mlflow": round(p["throughput_rps"] / max(m["throughput_rps"], 1e-9), 1)}
    out["targets"] = {"pond_1w_over_echo": 0.85, "pond_http_p99_ms": 5, "batch_vm_decisions_per_s": 100_000}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
