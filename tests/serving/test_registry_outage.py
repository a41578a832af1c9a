"""The service following `@champion` when the registry fails (docs/production.md, "When the registry
fails"): a registry that accepts connections and never answers, and one that refuses them. The service keeps answering
from the bundle it holds, counts the failed poll within two poll intervals, picks up a champion moved after the outage
within a poll and its budget, and stops on SIGTERM within 5 s with status 0 while requests are in flight and a poll
hangs, as PID 1 where the machine gives this test a PID namespace of its own.

The registry is a real `mlflow server` behind a TCP relay this test switches between forwarding, holding every
connection open without a byte in answer, and refusing connections (its port closed)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import run_pond, small_params
from tests.model.test_registry import _night
from tests.serving.conftest import request_of
from tests.serving.test_registry_server import _start, _wait, server_env
from tests.serving.test_uvicorn import _free_port

pytestmark = pytest.mark.slow


class Relay:
    """127.0.0.1:port in front of an upstream port, in one of three modes: ``forward``, ``hang`` (accept, read
    nothing, answer nothing, keep the connection) and ``refuse`` (the port closed: connections are refused)."""

    def __init__(self, upstream: int) -> None:
        self.upstream, self.port, self.mode = upstream, _free_port(), "forward"
        self.held: list[socket.socket] = []
        self.relayed: list[socket.socket] = []
        self.listener: socket.socket | None = None
        self.closing = False
        self._listen()

    def _listen(self) -> None:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(64)
        self.listener = sock
        threading.Thread(target=self._accept, args=(sock,), daemon=True).start()

    def _accept(self, sock: socket.socket) -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            if self.mode == "hang":
                self.held.append(conn)
                continue
            try:
                up = socket.create_connection(("127.0.0.1", self.upstream))
            except OSError:
                conn.close()
                continue
            self.relayed += [conn, up]
            for a, b in ((conn, up), (up, conn)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def set(self, mode: str) -> None:
        """Switch modes; connections relayed so far are cut (a client's pooled connection would go on working)."""
        for conn in self.relayed:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
        self.relayed.clear()
        if mode == "refuse" and self.listener is not None:
            with contextlib.suppress(OSError):    # wakes the accept() under way: a close alone leaves it listening
                self.listener.shutdown(socket.SHUT_RDWR)
            self.listener.close()
            self.listener = None
        elif mode != "refuse" and self.listener is None:
            self._listen()
        self.mode = mode

    def close(self) -> None:
        self.set("refuse")
        for conn in self.held:
            conn.close()


@pytest.fixture(scope="module")
def registry(tmp_path_factory, small_bundle, small_raw):
    """A `mlflow server` holding two versions of `pond-znuma` (v1 champion, v2 challenger), behind a relay."""
    tmp = tmp_path_factory.mktemp("outage")
    port = _free_port()
    server = _start(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"sqlite:///{tmp / 'server.db'}", "--artifacts-destination", str(tmp / "artifacts")],
        tmp / "mlflow-server.log", cwd=tmp, env=server_env())
    uri = f"http://127.0.0.1:{port}"
    relay = None
    try:
        _wait(f"{uri}/health", server, "mlflow server")
        params = tmp / "params.yaml"
        params.write_text(yaml.safe_dump(small_params()))
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("MLFLOW_TRACKING_URI", uri)
            for name, without_li in (("night1", False), ("night2", True)):
                assert run_pond(["--params", str(params), *_night(small_bundle, small_raw, tmp / "nights", name,
                                                                   without_li=without_li)]) == 0
        relay = Relay(port)
        yield uri, relay, tmp
    finally:
        if relay is not None:
            relay.close()
        server.terminate()
        server.wait(timeout=30)


def _pid_namespace() -> bool:
    """Whether this machine lets the test start a process as PID 1 of a PID namespace of its own."""
    try:
        out = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", "echo $$"],
                             capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and out.stdout.strip() == "1"


def _serve(relay: Relay, tmp: Path, log_name: str, as_pid1: bool, **env: str) -> tuple[subprocess.Popen, int, str]:
    """`pond serve` following the relay, its output in ``tmp / log_name``; returns the process, the PID to signal
    and the base URL."""
    port = _free_port()
    environ = {**os.environ, "POND_REGISTRY_MODEL": "pond-znuma",
               "POND_MLFLOW_TRACKING_URI": f"http://127.0.0.1:{relay.port}", **env}
    environ.pop("MLFLOW_TRACKING_URI", None)
    cmd = [sys.executable, "-m", "pond.pipelines", "serve", "--port", str(port)]
    if as_pid1:
        cmd = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", *cmd]   # its child dies with it
    proc = _start(cmd, tmp / log_name, cwd=tmp, env=environ)
    base = f"http://127.0.0.1:{port}"
    _wait(f"{base}/readyz", proc, "pond serve")
    pid = proc.pid
    if as_pid1:       # the service is unshare's child, PID 1 inside; signal it, not unshare
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        assert len(children) == 1, children
        pid = int(children[0])
        assert Path(f"/proc/{pid}/status").read_text().split("NSpid:")[1].splitlines()[0].split()[-1] == "1"
    return proc, pid, base


def _failed_reloads(base: str) -> float:
    m = re.search(r'^pond_reloads_total\{outcome="failed"\} (\S+)$', httpx.get(f"{base}/metrics").text, re.MULTILINE)
    return float(m.group(1)) if m else 0.0


class Load:
    """Batch calls from a few connections; every answer is kept, and every failure with its kind."""

    def __init__(self, base: str, reqs: list[dict], connections: int = 4) -> None:
        self.base, self.reqs = base, reqs
        self.ok, self.versions, self.failures = 0, set(), []
        self.stop, self.stopping = threading.Event(), threading.Event()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(connections)]
        for t in self.threads:
            t.start()

    def _run(self) -> None:
        with httpx.Client(base_url=self.base, timeout=10) as client:
            while not self.stop.is_set():
                try:
                    r = client.post("/v1/allocations/batch", json={"requests": self.reqs})
                except httpx.TransportError as exc:
                    # After SIGTERM only: the port closed (connect refused), or the request was sent on a kept-alive
                    # connection the stopping server closed as idle before reading it (closed, or reset because the
                    # unread request was in its buffer) - no byte of an answer came. A request under way gets its
                    # answer, with "connection: close"; HTTP clients retry the unread ones elsewhere. Anything
                    # else, or any of these before the signal, is a failure.
                    unread = isinstance(exc, httpx.ConnectError) or "without sending a response" in str(exc) \
                        or "reset by peer" in str(exc)
                    if not (self.stopping.is_set() and unread):
                        self.failures.append(repr(exc))
                    return
                except httpx.HTTPError as exc:
                    self.failures.append(repr(exc))
                    return
                if r.status_code != 200:
                    self.failures.append(r.status_code)
                    continue
                self.ok += 1
                self.versions.update(a["model_version"] for a in r.json()["allocations"])

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=15)


def _until(check, timeout_s: float, what: str) -> float:
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < timeout_s, f"{what} within {timeout_s} s"
        time.sleep(0.1)
    return time.monotonic() - start


def test_an_outage_is_counted_at_once_and_the_next_champion_picked_up(registry, next_day_vms):
    from mlflow import MlflowClient

    uri, relay, tmp = registry
    interval = 2.0
    proc, _, base = _serve(relay, tmp, "serve-outage.log", as_pid1=False, POND_RELOAD_INTERVAL_S=str(interval),
                           POND_REGISTRY_TIMEOUT_S="1", POND_REGISTRY_RETRIES="1")
    load = Load(base, [request_of(r) for r in next_day_vms.head(20).itertuples()])
    try:
        assert httpx.get(f"{base}/readyz").json()["model_version"] == "pond-znuma/v1"
        for mode in ("hang", "refuse"):
            before = _failed_reloads(base)
            relay.set(mode)
            took = _until(lambda before=before: _failed_reloads(base) > before, 2 * interval + 1.0,
                          f"a poll against a registry that does {mode} counted as failed")
            print(f"registry that does {mode}: failed poll counted {took:.1f} s after the outage began")
            assert httpx.get(f"{base}/readyz").status_code == 200
        relay.set("forward")
        MlflowClient(tracking_uri=uri, registry_uri=uri).set_registered_model_alias("pond-znuma", "champion", 2)
        took = _until(lambda: httpx.get(f"{base}/readyz").json()["model_version"] == "pond-znuma/v2",
                      interval + 3.0, "the champion moved after the outage picked up")
        print(f"champion moved after the outage: served {took:.1f} s later")
        time.sleep(0.5)
        load.finish()
        assert load.failures == [] and load.ok > 0
        assert load.versions == {"pond-znuma/v1", "pond-znuma/v2"}
        text = (tmp / "serve-outage.log").read_text()
        assert f"bundle not loaded from models:/pond-znuma@champion (http://127.0.0.1:{relay.port})" in text
    finally:
        relay.set("forward")
        load.finish()
        proc.terminate()
        proc.wait(timeout=30)
    assert proc.returncode == 0, (tmp / "serve-outage.log").read_text()[-2000:]


def test_sigterm_stops_within_5s_with_status_0_while_a_poll_hangs(registry, next_day_vms):
    """A registry timeout of 60 s: the poll under way when SIGTERM comes cannot end before the grace period."""
    _, relay, tmp = registry
    as_pid1 = _pid_namespace()
    proc, pid, base = _serve(relay, tmp, "serve-stop.log", as_pid1=as_pid1, POND_RELOAD_INTERVAL_S="0.5",
                             POND_REGISTRY_TIMEOUT_S="60", POND_REGISTRY_RETRIES="0")
    load = Load(base, [request_of(r) for r in next_day_vms.head(20).itertuples()])
    try:
        relay.set("hang")
        time.sleep(1.5)                   # a poll is now waiting on a registry that never answers
        ok_before = load.ok
        start = time.monotonic()
        load.stopping.set()
        os.kill(pid, signal.SIGTERM)
        proc.wait(timeout=30)
        took = time.monotonic() - start
        load.finish()
        print(f"SIGTERM as PID {1 if as_pid1 else pid}: exited {proc.returncode} after {took:.2f} s; "
              f"{load.ok - ok_before} answers after the signal, {load.failures} failures")
    finally:
        relay.set("forward")
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            proc.kill()
            proc.wait()
    log = (tmp / "serve-stop.log").read_text()
    assert proc.returncode == 0, log[-2000:]
    assert took < 5.0, (took, log[-2000:])
    assert load.ok > ok_before and load.failures == [], load.failures
    assert "Shutting down" in log and ("Finished server process" in log)
