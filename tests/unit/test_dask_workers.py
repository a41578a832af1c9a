"""A fit on a cluster whose workers are not registered yet waits for one instead of fitting on nobody."""

from __future__ import annotations

import pytest

from pond.core.errors import ConfigError
from pond.models.dask_fit import workers_of


class _Cluster:
    """A client whose scheduler lists no worker until one is waited for."""

    def __init__(self) -> None:
        self.waited: list[tuple[int, float]] = []
        self.workers: dict[str, dict] = {}

    def scheduler_info(self, n_workers: int = 5) -> dict:
        assert n_workers == -1          # every worker, not the first five
        return {"workers": dict(self.workers)}

    def wait_for_workers(self, n_workers: int, timeout: float) -> None:
        self.waited.append((n_workers, timeout))
        self.workers = {"tcp://b:2": {}, "tcp://a:1": {}}


def test_workers_are_waited_for_when_none_is_registered():
    c = _Cluster()
    assert workers_of(c, timeout=5) == ["tcp://a:1", "tcp://b:2"] and c.waited == [(1, 5)]
    assert workers_of(c) == ["tcp://a:1", "tcp://b:2"] and c.waited == [(1, 5)]   # registered: no wait


def test_a_cluster_that_stays_empty_is_a_config_error_saying_what_to_start():
    class Empty(_Cluster):
        def wait_for_workers(self, n_workers: int, timeout: float) -> None:
            raise TimeoutError(f"Only 0/{n_workers} workers arrived after {timeout}")

    with pytest.raises(ConfigError, match=r"no worker for 5 s: start workers .*engine.backend: local"):
        workers_of(Empty(), timeout=5)
