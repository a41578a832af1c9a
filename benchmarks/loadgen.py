"""A small closed-loop HTTP/1.1 load generator: C keep-alive connections, each sending requests back
to back for a fixed time; prints throughput and latency percentiles as JSON.

    python benchmarks/loadgen.py http://127.0.0.1:8000/v1/allocations bodies.jsonl -c 16 -d 20

``bodies.jsonl`` holds one JSON body per line, sent round-robin. Plain asyncio streams (uvloop
when installed), so the generator costs little CPU beside the server on a 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np


async def _read_response(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
    if "content-length" in headers:
        await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding") == "chunked":
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip(), 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    return status


async def _connection(host: str, port: int, path: str, bodies: list[bytes], offset: int, until: float,
                      warm_until: float, latencies: list[float], errors: list[int], headers: str) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    i = offset
    try:
        while True:
            body = bodies[i % len(bodies)]
            i += 1
            req = (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n{headers}"
                   f"Content-Length: {len(body)}\r\n\r\n").encode() + body
            t = time.perf_counter()
            writer.write(req)
            status = await _read_response(reader)
            done = time.perf_counter()
            if done > until:
                return
            if done >= warm_until:
                latencies.append(done - t)
                if status != 200:
                    errors.append(status)
    finally:
        writer.close()


async def run(url: str, bodies: list[bytes], connections: int, duration_s: float, warmup_s: float,
              token: str | None = None) -> dict:
    u = urlsplit(url)
    headers = f"Authorization: Bearer {token}\r\n" if token else ""
    start = time.perf_counter()
    warm_until, until = start + warmup_s, start + warmup_s + duration_s
    latencies: list[float] = []
    errors: list[int] = []
    await asyncio.gather(*(_connection(u.hostname, u.port or 80, u.path, bodies, k * 7919, until, warm_until,
                                       latencies, errors, headers) for k in range(connections)))
    lat = np.array(latencies) * 1e3
    return {"url": url, "connections": connections, "duration_s": duration_s, "requests": len(lat),
            "throughput_rps": round(len(lat) / duration_s, 1), "errors": len(errors),
            "p50_ms": round(float(np.percentile(lat, 50)), 3) if len(lat) else None,
            "p99_ms": round(float(np.percentile(lat, 99)), 3) if len(lat) else None}


def run_sync(*args, **kwargs) -> dict:
    try:
        import uvloop
        return uvloop.run(run(*args, **kwargs))
    except ImportError:
        return asyncio.run(run(*args, **kwargs))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("bodies", type=Path)
    ap.add_argument("-c", "--connections", type=int, default=16)
    ap.add_argument("-d", "--duration", type=float, default=20)
    ap.add_argument("-w", "--warmup", type=float, default=3)
    args = ap.parse_args()
    bodies = [ln.encode() for ln in args.bodies.read_text().splitlines() if ln.strip()]
    print(json.dumps(run_sync(args.url, bodies, args.connections, args.duration, args.warmup)))


if __name__ == "__main__":
    main()
