"""Pond's Fig. 3 accounting, before any model: VMs keep the servers the first fit gave them, each server and
pool buys its own peak."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from pond.simulator.fixed_pools import fixed_share_savings, peaks, pooled_savings
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
    # the cluster is these two servers: one pool per cluster is the 4-socket pool
    assert got.cluster_pool.tolist() == pytest.approx(got[got.pool_sockets == 4].set_index("share").savings
                                                      .reindex(got.share).tolist())
    # a window of a day holds this 4-hour trace whole: the same figures (benchmarks/pond_evidence.py's windows)
    day = fixed_share_savings(trace, (0.1, 0.5), (2, 4), placed=place(trace, ServerShape(vcpus=4, memory_gb=16)),
                              days=1)
    pd.testing.assert_frame_equal(day, got)
    # a day earlier, a VM of 1 GB that ends at 1h: a window from the next day leaves it out and the figures stay
    rows = [(0, 4, 2, 1.0), (0, 2, 2, 8.0), (0, 4, 2, 1.0), (2, 4, 2, 1.0), (2, 4, 2, 8.0)]
    earlier = _vms([(0, 1, 2, 1.0)] + [(r + 24, d + 24, c, g) for r, d, c, g in rows])
    late = fixed_share_savings(earlier, (0.1, 0.5), (2, 4), placed=place(earlier, ServerShape(vcpus=4, memory_gb=16)),
                               days=1, first_day=1)
    pd.testing.assert_frame_equal(late, got)


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
    assert (got.cluster_pool >= got.savings - 1e-12).all()      # no pool size saves more than the whole cluster's
    for _, g in got.groupby("pool_sockets"):       # a larger share saves more, in proportion
        assert (np.diff(g.sort_values("share").savings) >= -1e-12).all()


def test_fleets_pool_as_one_fleet_weighted_by_their_servers_peaks():
    """Two fleets: 100 GB of server peaks saving 10% and 300 GB saving 20% need 90 + 240 of 400 GB: 17.5%."""
    def fleet(saved: float, ceiling: float, gb: float) -> pd.DataFrame:
        return pd.DataFrame({"share": [0.5], "pool_sockets": [32], "servers": [1], "pools": [1],
                             "savings": [saved], "cluster_pool": [ceiling], "all_local_gb": [gb]})
    got = pooled_savings([fleet(0.1, 0.2, 100.0), fleet(0.2, 0.2, 300.0)])
    assert got.savings.tolist() == pytest.approx([0.175]) and got.cluster_pool.tolist() == pytest.approx([0.2])
    assert got.all_local_gb.tolist() == [400.0]


def test_pooling_two_draws_matches_their_trace_replayed_as_one():
    """Two clusters' traces pooled from their own figures equal the figures of both in one trace."""
    rng = np.random.default_rng(3)
    parts = []
    for cluster in ("a", "b"):
        created = np.sort(rng.uniform(0, 24 * 3, 200))
        parts.append(_vms(list(zip(created, created + rng.exponential(6, 200) + 0.1, rng.choice([2, 4, 8], 200),
                                   rng.choice([4.0, 8.0, 32.0], 200))), cluster))
    shape = ServerShape(vcpus=16, memory_gb=96)
    one = pd.concat(parts, ignore_index=True)
    whole = fixed_share_savings(one, (0.5,), (2, 4), placed=place(one, shape))
    apart = pooled_savings([fixed_share_savings(p, (0.5,), (2, 4), placed=place(p, shape)) for p in parts])
    assert apart.savings.tolist() == pytest.approx(whole.savings.tolist())
    assert apart.cluster_pool.tolist() == pytest.approx(whole.cluster_pool.tolist())


def test_a_window_with_no_vm_saves_nothing_measurable_and_weighs_nothing_when_pooled():
    """A foreign trace shorter than the window asked for: NaN, not a division warning, and no weight when pooled."""
    trace = _vms([(0, 4, 2, 1.0), (0, 2, 2, 8.0), (0, 4, 2, 1.0), (2, 4, 2, 1.0), (2, 4, 2, 8.0)])
    placed = place(trace, ServerShape(vcpus=4, memory_gb=16))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        empty = fixed_share_savings(trace, (0.5,), (4,), placed=placed, days=1, first_day=3)
    assert empty[["savings", "cluster_pool", "all_local_gb"]].isna().all().all()
    whole = fixed_share_savings(trace, (0.5,), (4,), placed=placed)
    both = pooled_savings([whole, empty])
    assert both.savings.tolist() == pytest.approx(whole.savings.tolist())
