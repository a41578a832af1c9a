"""Hostile load: worst-case bodies against a real `pond serve`, while one client sends good requests.

Starts the service on loopback (tonight's bundle, or the paths given), measures a good single
request's latency alone, then again while two processes send, for ``--seconds``, bodies built to
cost the most: 32 MB declared and 32 MB chunked (no length), a 32 MB counters map on the single
route, a batch body at its size limit full of 1s, one full of tiny objects, and a batch of 10,000
invalid requests. Prints the good request's p50/p99/max in both phases, the answers the bad
bodies got, and the server's memory growth (peak RSS over the run minus RSS after warm-up, from
/proc). The attackers are processes of their own, so the good client's latency is the server's,
not this script's. Targets: good p99 under 50 ms, growth under 200 MB.

    python -m benchmarks.hostile_load                 # after `dvc repro`
    python -m benchmarks.hostile_load --seconds 3 --bundle-dir DIR --json   # (tests)
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd

from benchmarks.serving import ROOT, free_port, start_server

MB = 2 ** 20


def _rss_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


def _chunks(data: bytes, size: int = MB):
    for i in range(0, len(data), size):
        yield data[i:i + size]


def bad_bodies(good: dict, max_batch: int = 10_000) -> list[tuple[str, str, dict]]:
    """(name, path, httpx request kwargs), each built to cost the server the most."""
    ones = b'{"requests": [' + b"1," * (16 * MB - 1) + b"1]}"                      # 32 MB of values
    at_cap_ones = b'{"requests": [' + b"1," * (2 * MB - 8) + b"1]}"                # 4 MB, the batch cap
    tiny = b'{"requests": [' + b'{"a":1},' * (4 * MB // 8 - 4) + b"{}]}"           # 4 MB of objects
    counters = b'{"vm_id": "x", "counters": {' + b",".join(
        b'"E%d": true' % i for i in range(3 * MB)) + b"}}"                            # ~32 MB map
    invalid = json.dumps({"requests": [{**good, "memory_gb": -1}] * max_batch}).encode()
    headers = {"content-type": "application/json"}
    return [
        ("batch 32 MB declared", "/v1/allocations/batch", {"content": ones, "headers": headers}),
        ("batch 32 MB chunked", "/v1/allocations/batch", {"content": _chunks(ones), "headers": headers}),
        ("single 32 MB counters", "/v1/allocations", {"content": counters, "headers": headers}),
        ("batch of 1s at the cap", "/v1/allocations/batch", {"content": at_cap_ones, "headers": headers}),
        ("batch of tiny objects at the cap", "/v1/allocations/batch", {"content": tiny, "headers": headers}),
        ("batch of 10,000 invalid requests", "/v1/allocations/batch", {"content": invalid, "headers": headers}),
    ]


def _good_latencies(base: str, body: dict, seconds: float) -> tuple[list[float], Counter]:
    times, codes = [], Counter()
    with httpx.Client(base_url=base, timeout=30) as c:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            t = time.perf_counter()
            r = c.post("/v1/allocations", json=body)
            times.append(time.perf_counter() - t)
            codes[r.status_code] += 1
    return times, codes


def _attack(base: str, good: dict, which: list[int], seconds: float, results: Any) -> None:
    """One attacking process (its own GIL: the good client's latency is the server's, not ours)."""
    everything = bad_bodies(good)
    bodies = [everything[k] for k in which]
    ones = everything[0][2]["content"]
    seen: Counter = Counter()
    with httpx.Client(base_url=base, timeout=60) as c:
        end, i = time.perf_counter() + seconds, 0
        while time.perf_counter() < end:
            name, path, kw = bodies[i % len(bodies)]
            req = kw if isinstance(kw["content"], bytes) else {**kw, "content": _chunks(ones)}  # chunks anew
            try:
                status: Any = c.post(path, **req).status_code
            except httpx.TransportError as exc:     # the server may close a connection it refused
                status = type(exc).__name__
            seen[f"{name} -> {status}"] += 1
            i += 1
    results.put(dict(seen))


def _summary(times: list[float]) -> dict[str, float]:
    a = np.array(times) * 1000
    return {"requests": len(a), "p50_ms": round(float(np.percentile(a, 50)), 2),
            "p99_ms": round(float(np.percentile(a, 99)), 2), "max_ms": round(float(a.max()), 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="attack duration (default 20)")
    ap.add_argument("--bundle-dir", type=Path, default=None,
                    help="a dir with policy.json, li/, um/, features/snapshot (default: tonight's files)")
    ap.add_argument("--json", action="store_true", help="print one JSON object only")
    args = ap.parse_args()
    if args.bundle_dir is None:
        paths = [ROOT / "data/policy/policy.json", ROOT / "data/models/li", ROOT / "data/models/um",
                 ROOT / "data/features/snapshot"]
    else:
        d = args.bundle_dir
        paths = [d / "policy.json", d / "li", d / "um", d / "features" / "snapshot"]
    requests = pd.read_parquet(paths[3] / "request_shapes.parquet").head(1)
    good = {"vm_id": "good-1", **{k: (None if pd.isna(v) else v) for k, v in requests.iloc[0].items() if k != "vms"}}
    good["vcpus"], good["memory_gb"] = int(good["vcpus"]), float(good["memory_gb"])
    port = free_port()
    cmd = [sys.executable, "-m", "pond.pipelines", "serve", "--port", str(port), "--policy", str(paths[0]),
           "--li", str(paths[1]), "--um", str(paths[2]), "--snapshot", str(paths[3])]
    base = f"http://127.0.0.1:{port}"
    proc = start_server(cmd, {**os.environ, "POND_RELOAD_INTERVAL_S": "0"}, f"{base}/readyz", timeout=90)
    try:
        quiet, _ = _good_latencies(base, good, min(3.0, args.seconds))
        rss0 = _rss_kb(proc.pid, "VmRSS")
        ctx = multiprocessing.get_context("spawn")
        results = ctx.Queue()
        n = len(bad_bodies(good))
        attackers = [ctx.Process(target=_attack, args=(base, good, list(range(k, n, 2)), args.seconds + 2, results))
                     for k in (0, 1)]
        for a in attackers:
            a.start()
        time.sleep(2.0)                              # the attackers build their bodies first
        loud, codes = _good_latencies(base, good, args.seconds)
        seen: Counter = Counter()
        for _ in attackers:
            seen.update(results.get(timeout=180))
        for a in attackers:
            a.join()
        peak = _rss_kb(proc.pid, "VmHWM")
        alive = proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    out = {"good_alone": _summary(quiet), "good_under_attack": _summary(loud),
           "good_statuses": {str(k): v for k, v in codes.items()},
           "bad_bodies": dict(sorted(seen.items())),
           "server_rss_after_warmup_mb": round(rss0 / 1024, 1),
           "server_growth_mb": round((peak - rss0) / 1024, 1), "server_alive": alive,
           "targets": {"good_p99_ms": 50, "server_growth_mb": 200}, "cores": os.cpu_count()}
    print(json.dumps(out, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
