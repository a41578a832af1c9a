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


def _start(small_bundle, **env: str) -> tuple[subprocess.Popen, int]:
    port = _free_port()
    cmd = [sys.executable, "-m", "pond.pipelines", "serve", "--port", str(port),
           "--policy", str(small_bundle / "policy.json"), "--li", str(small_bundle / "li"),
           "--um", str(small_bundle / "um"), "--snapshot", str(small_bundle / "features" / "snapshot"),
           "--monitor", str(small_bundle / "monitor")]
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "POND_RELOAD_INTERVAL_S": "0", **env},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 60
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200:
                return proc, port
        except httpx.TransportError:
            pass
        assert proc.poll() is None and time.time() < deadline, "service not ready"
        time.sleep(0.2)


def _exchange(port: int, data: bytes, wait_s: float = 5.0) -> bytes:
    """Send raw bytes, then read until the server closes the connection (or ``wait_s``)."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(data)
        s.settimeout(wait_s)
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
        except (TimeoutError, ConnectionResetError):
            pass
        return out


def test_uvicorn_process_serves_every_endpoint(small_bundle, small_raw, next_day_vms, engine):
    proc, port = _start(small_bundle)
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base) as c:
            req = request_of(next_day_vms.iloc[0])
            one = c.post("/v1/allocations", json=req).json()
            assert one["model_version"] == engine.version and one["vm_id"] == req["vm_id"]
            assert c.post("/v1/allocations/batch", json={"requests": [req, req]}).json()["allocations"] == [one, one]
            counters = pd.read_parquet(small_raw / "vm_counters.parquet").iloc[0]
            events = engine.snapshot["events"]
            q = c.post("/v1/qos", json={"vm_id": "v", "counters": {e: float(counters[e]) for e in events},
                                        "allocation": {"memory_gb": 16, "pool_gb": 4}}).json()
            assert q["action"] in ("none", "reconfigure_local") and 0 <= q["p_exceeds_pdm"] <= 1
            assert q["monitor"] == "pool_counters"
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
    res = subprocess.run([sys.executable, "-m", "benchmarks.hostile_load", "--seconds", "3",
                          "--bundle-dir", str(small_bundle), "--json"], capture_output=True, text=True, timeout=600,
                         cwd=ROOT, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["server_alive"] and set(out["good_statuses"]) == {"200"}
    assert {k.rsplit(" -> ", 1)[1] for k in out["bad_bodies"]} <= {"413", "422", "431", "RemoteProtocolError",
                                                                    "WriteError", "ReadError"}
    assert out["good_under_attack"]["p99_ms"] < 500 and out["server_growth_mb"] < 200


def test_headers_deadlines_and_hang_ups_are_bounded(small_bundle, next_day_vms):
    proc, port = _start(small_bundle, POND_READ_TIMEOUT_S="1", POND_MAX_HEADER_KB="8")
    try:
        head = b"POST /v1/allocations HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        big = _exchange(port, head + b"x-big: " + b"a" * 20_000 + b"\r\n\r\n")
        assert big.startswith(b"HTTP/1.1 431") and b"exceed 8192 bytes" in big
        many = _exchange(port, head + b"".join(b"x-%d: 1\r\n" % i for i in range(150)) + b"\r\n")
        assert many.startswith(b"HTTP/1.1 431") and b"more than 100 headers" in many
        t = time.perf_counter()
        stalled = _exchange(port, head)                              # headers never finish
        assert stalled.startswith(b"HTTP/1.1 408") and time.perf_counter() - t < 4
        body = json.dumps(request_of(next_day_vms.iloc[0])).encode()
        half = _exchange(port, head + b"content-length: %d\r\n\r\n" % len(body) + body[:10])
        assert half.startswith(b"HTTP/1.1 408")                      # the body never finishes
        with socket.create_connection(("127.0.0.1", port)) as s:      # hang up mid-body
            s.sendall(head + b"content-length: %d\r\n\r\n" % len(body) + body[:10])
        time.sleep(0.5)
        ok = httpx.post(f"http://127.0.0.1:{port}/v1/allocations", json=request_of(next_day_vms.iloc[0]))
        assert ok.status_code == 200
        # a large body arrives in the same reads as its small head: it is body, not head (200, not 431)
        batch = {"requests": [request_of(r) for r in next_day_vms.itertuples()] * 4}
        assert len(json.dumps(batch)) > 100_000
        # on one keep-alive connection a single read may hold a whole request: none of it is head
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as c:
            assert [c.post("/v1/allocations/batch", json=batch).status_code for _ in range(5)] == [200] * 5
    finally:
        proc.terminate()
        out = proc.communicate(timeout=20)[0]
    assert "Traceback" not in out and "Exception in ASGI application" not in out, out[-3000:]
