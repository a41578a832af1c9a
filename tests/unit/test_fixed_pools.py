"""Pond's Fig. 3 accounting, before any model: VMs keep the servers the first fit gave them, each server and
pool buys its own peak (issue 47)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pond.simulator.fixed_pools import fixed_share_savings, peaks
from pond.simulator.packing import ServerShape
from pond.simulator.stranding import place

T0 = pd.Timestamp("2026-01-01", tz="UTC")


def _vms(rows: list[tuple[float, float, int, float]], cluster: str = "c") -> pd.DataFrame:
    """(created hour, deleted hour, vcpus, GB) per VM."""
    return pd.DataFrame({"vm_id": [f"{cluster}{i}" for i in range(len(rows))], "cluster_id": cluster,
                         "created_at": [T0 + pd.Timedelta(hours=r[0]) for r in rows],
                         "deleted_at": [T0 + pd.Timedelta(hours=r[1]) for r in rows],
                         "vcpus": [r[2] for r in rows], "memory_gb": [r[3] for r in rows]})


def test_a_pool_buys_less_than_its_servers_peaks_when_they_peak_apart():
    """Servers of 4 vCPUs. a (1 GB) and b (8 GB, until 2h) fill server 0; c (1 GB) goes to server 1; at 2h b
    leaves, e (1 GB) takes its cores on server 0 and d (8 GB) goes to server 1, where the VM keeps its server.
    Server peaks: 9 and 9 (18 GB all local). The pool of both servers peaks at 11 (2 + 9 from 2h on).
    Half of every VM on the pool: 9 + 5.5 = 14.5 GB, 19.4% saved; pools of one server save nothing."""
    trace = _vms([(0, 4, 2, 1.0), (0, 2, 2, 8.0), (0, 4, 2, 1.0), (2, 4, 2, 1.0), (2, 4, 2, 8.0)])
    got = fixed_share_savings(trace, (0.1, 0.5), (2, 4), placed=place(trace, ServerShape(vcpus=4, memory_gb=16)))
    by = got.set_index(["pool_sockets", "share"]).savings
    assert by[(4, 0.5)] == pytest.approx(1 - 14.5 / 18) and by[(4, 0.1)] == pytest.approx(0.1 * (1 - 11 / 18))
    assert by[(2, 0.5)] == pytest.approx(0.0) and got.servers.unique().tolist() == [2]
    # a window of a day holds this 4-hour trace whole: the same figures (benchmarks/pond_evidence.py's windows)
    day = fixed_share_savings(trace, (0.1, 0.5), (2, 4), placed=place(trace, ServerShape(vcpus=4, memory_gb=16)),
                              days=1)
    pd.testing.assert_frame_equal(day, got)


def test_peaks_restart_per_unit_and_take_departures_first():
    start, end = np.array([0, 5, 5, 0]), np.array([5, 9, 9, 3])
    unit, gb = np.array([0, 0, 1, 1]), np.array([4.0, 3.0, 2.0, 7.0])
    assert peaks(start, end, unit, gb, 0, 10, 2).tolist() == [4.0, 7.0]
    assert peaks(start, end, unit, gb, 4, 10, 2).tolist() == [4.0, 2.0]    # the window clips: 7 GB ended at 3


@pytest.mark.parametrize("seed", range(8))
def test_a_fixed_split_never_raises_the_sum_of_per_server_peaks(seed):
    rng = np.random.default_rng(seed)
    rows = []
    for cluster in ("a", "b"):
        n = 300
        created = np.sort(rng.uniform(0, 24 * 6, n))
        vms = _vms(list(zip(created, created + rng.exponential(6, n) + 0.1, rng.choice([2, 4, 8], n),
                            rng.choice([4.0, 8.0, 16.0, 32.0], n))), cluster)
        rows.append(vms)
    got = fixed_share_savings(pd.concat(rows, ignore_index=True), (0.1, 0.3, 0.5), (2, 8, 16, 64))
    assert (got.savings >= -1e-12).all()
    for _, g in got.groupby("pool_sockets"):       # a larger share saves more, in proportion
        assert (np.diff(g.sort_values("share").savings) >= -1e-12).all()
