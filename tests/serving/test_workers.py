"""`pond serve --workers 2`: both processes answer, each reloads a new bundle, /metrics sums them."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from pond.telemetry.atomic import write_atomic
from tests.conftest import ROOT
from tests.serving.conftest import request_of
from tests.serving.test_registry_server import _start, _wait
from tests.serving.test_uvicorn import _free_port

pytestmark = pytest.mark.slow


def _counter(text: str, endpoint: str) -> float:
    pattern = rf'^pond_requests_total{{endpoint="{re.escape(endpoint)}",status="200"}} (\S+)$'
    return sum(float(v) for v in re.findall(pattern, text, re.MULTILINE))


@contextmanager
def _two_workers(tmp_path: Path, bundle: list[str], **env: str | None) -> Iterator[str]:
    """`pond serve --workers 2` on a free port with ``bundle``'s path options and ``env`` over the environment (None:
    unset); yields its base URL once both workers can answer, stops it on exit."""
    port = _free_port()
    cmd = [sys.executable, "-m", "pond.pipelines", "serve", "--port", str(port), "--workers", "2", *bundle]
    merged = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    proc = _start(cmd, tmp_path / "serve.log", cwd=ROOT, env=merged)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait(f"{base}/readyz", proc, "pond serve --workers 2")
        time.sleep(2.0)                       # the second worker may still be warming up
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_two_workers_share_the_port_reload_and_sum_their_metrics(small_bundle, tmp_path, next_day_vms):
    for d in ("li", "um"):
        shutil.copytree(small_bundle / d, tmp_path / d)
    shutil.copytree(small_bundle / "features" / "snapshot", tmp_path / "snapshot")
    policy = json.loads((small_bundle / "policy.json").read_text())
    (tmp_path / "policy.json").write_text(json.dumps(policy))
    prom = tmp_path / "prom"
    bundle = ["--policy", str(tmp_path / "policy.json"), "--li", str(tmp_path / "li"), "--um", str(tmp_path / "um"),
              "--snapshot", str(tmp_path / "snapshot")]
    req = request_of(next(next_day_vms.itertuples()))
    with _two_workers(tmp_path, bundle, POND_RELOAD_INTERVAL_S="0.3", PROMETHEUS_MULTIPROC_DIR=str(prom)) as base:
        first = {httpx.post(f"{base}/v1/allocations", json=req).json()["model_version"] for _ in range(60)}
        assert len(first) == 1
        assert len(list(prom.glob("counter_*.db"))) == 2, "both workers answered"
        deadline = time.time() + 10           # each worker adds its counts at least every second
        while (count := _counter(text := httpx.get(f"{base}/metrics").text, "/v1/allocations")) < 60:
            assert time.time() < deadline, count
            time.sleep(0.2)
        assert count == 60
        assert re.search(r"^pond_ready 1\.0$", text, re.MULTILINE)

        write_atomic(tmp_path / "policy.json", json.dumps({**policy, "li": {**policy["li"], "threshold": 0.0}}))
        deadline = time.time() + 30
        while True:                           # fresh connections reach either worker
            seen = {httpx.post(f"{base}/v1/allocations", json=req).json()["model_version"] for _ in range(20)}
            if not seen & first:
                break
            assert time.time() < deadline, f"a worker kept the old bundle: {seen}"
            time.sleep(0.3)
        assert len(seen) == 1
        reloads = httpx.get(f"{base}/metrics").text
        loaded = sum(float(v) for v in re.findall(r'^pond_reloads_total{outcome="loaded"} (\S+)$', reloads, re.MULTILINE))
        assert loaded == 4                    # each worker: its first load, then the new bundle


def test_a_flag_one_worker_answered_refuses_the_li_call_on_every_worker(small_bundle, small_raw, tmp_path,
                                                                        next_day_vms):
    from pond.serving.engine import Engine
    from tests.serving.conftest import bundle_paths
    from tests.serving.test_flag_memory import _flagged_counters, _li_call

    policy = json.loads((small_bundle / "policy.json").read_text())
    policy["serve"] = {"policy": "combined", "pool_cap": None}       # the small fleet's own serves UM only
    (tmp_path / "policy.json").write_text(json.dumps(policy))
    paths = bundle_paths(small_bundle)
    engine = Engine.load(dataclasses.replace(paths, policy=tmp_path / "policy.json"))
    row = _li_call(engine, next_day_vms)
    req, flagged = request_of(row), _flagged_counters(small_raw, engine)
    bundle = ["--policy", str(tmp_path / "policy.json"), "--li", str(paths.li_dir), "--um", str(paths.um_dir),
              "--snapshot", str(paths.snapshot_dir)]
    with _two_workers(tmp_path, bundle, POND_RELOAD_INTERVAL_S="0", POND_MONITOR_DIR=str(paths.monitor_dir),
                      PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "prom"),
                      POND_QOS_FLAGS=None) as base:           # unset: pond serve makes the workers' file
        assert {httpx.post(f"{base}/v1/allocations", json=req).json()["decision"] for _ in range(20)} == {"pool_only"}
        r = httpx.post(f"{base}/v1/qos", json={**flagged, "customer_id": row.customer_id, "vm_type": row.vm_type})
        assert r.json()["li_refused_until"] is not None
        time.sleep(1.5)                       # the other worker reads the file at most a second later
        got = [httpx.post(f"{base}/v1/allocations", json=req).json() for _ in range(30)]   # fresh connections
        assert {a["p_insensitive"] for a in got} == {None} and "pool_only" not in {a["decision"] for a in got}
