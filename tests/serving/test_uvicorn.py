"""A real uvicorn process on loopback answers every endpoint (`pond serve`)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import httpx
import pandas as pd
import pytest

from tests.conftest import ROOT
from tests.serving.conftest import request_of

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_uvicorn_process_serves_every_endpoint(small_bundle, small_raw, next_day_vms, engine):
    port = _free_port()
    cmd = [sys.executable, "-m", "pipelines", "serve", "--port", str(port),
           "--policy", str(small_bundle / "policy.json"), "--li", str(small_bundle / "li"),
           "--um", str(small_bundle / "um"), "--snapshot", str(small_bundle / "features" / "snapshot")]
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "POND_RELOAD_INTERVAL_S": "0"},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                if httpx.get(f"{base}/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, proc.stdout.read()
            assert time.time() < deadline, "service not ready within 60 s"
            time.sleep(0.2)
        with httpx.Client(base_url=base) as c:
            req = request_of(next_day_vms.iloc[0])
            one = c.post("/v1/allocations", json=req).json()
            assert one["model_version"] == engine.version and one["vm_id"] == req["vm_id"]
            assert c.post("/v1/allocations/batch", json={"requests": [req, req]}).json()["allocations"] == [one, one]
            counters = pd.read_parquet(small_raw / "vm_counters.parquet").iloc[0]
            events = engine.snapshot["events"]
            q = c.post("/v1/qos", json={"vm_id": "v", "counters": {e: float(counters[e]) for e in events}}).json()
            assert q["action"] in ("none", "reconfigure_local") and 0 <= q["p_exceeds_pdm"] <= 1
            assert c.post("/v1/allocations", json={**req, "memory_gb": 0}).status_code == 422
            assert c.get("/healthz").json() == {"status": "ok"}
            assert c.get("/v1/model").json()["version"] == engine.version
            assert "pond_requests_total" in c.get("/metrics").text
            assert c.get("/openapi.json").status_code == 200
        assert proc.poll() is None   # still up after bad input
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_hostile_bodies_do_not_stall_good_requests(small_bundle):
    """benchmarks/hostile_load.py for 3 s against the small bundle: every bad body is refused with a
    413/422 (never by building one error per element), no good request fails, and the good request's
    p99 stays under 500 ms (before bounded parsing, one 4 MB bad body stalled every client for 33 s)."""
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "hostile_load.py"), "--seconds", "3",
                          "--bundle-dir", str(small_bundle), "--json"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["server_alive"] and set(out["good_statuses"]) == {"200"}
    assert {k.rsplit(" -> ", 1)[1] for k in out["bad_bodies"]} <= {"413", "422", "RemoteProtocolError", "WriteError",
                                                                    "ReadError"}
    assert out["good_under_attack"]["p99_ms"] < 500 and out["server_growth_mb"] < 200
