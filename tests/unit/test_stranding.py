"""Stranded memory (Pond Fig. 2a), worked out by hand on a trace of one cluster."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pond.simulator.packing import ServerShape
from pond.simulator.stranding import WARMUP_DAYS, bought_server, by_utilization, cluster_days, place


def _vms(rows: list[tuple[float, float, int, float]]) -> pd.DataFrame:
    """(created hour, deleted hour or nan, vcpus, GB) per VM, one cluster."""
    t0 = pd.Timestamp("2026-01-01", tz="UTC")
    return pd.DataFrame({
        "vm_id": [f"v{i}" for i in range(len(rows))], "cluster_id": "c",
        "created_at": [t0 + pd.Timedelta(hours=r[0]) for r in rows],
        "deleted_at": [pd.NaT if np.isnan(r[1]) else t0 + pd.Timedelta(hours=r[1]) for r in rows],
        "vcpus": [r[2] for r in rows], "memory_gb": [r[3] for r in rows]})


def test_a_server_whose_cores_are_rented_strands_its_free_memory():
    """Server 0 takes an 8-vCPU, 16 GB VM and a 6-vCPU, 20 GB one: 14 of 16 vCPUs, no room for a third 4-vCPU
    VM (the smallest), which opens server 1. Server 0 strands 64 - 36 = 28 GB; server 1 (4 vCPUs, 8 GB) none.
    Cores scheduled: 18 / 32; stranded: 28 / 128 GB. Every hour of every day after the warm-up is the same."""
    days = WARMUP_DAYS + 3
    end = 24.0 * days
    trace = _vms([(0, np.nan, 8, 16.0), (0, np.nan, 6, 20.0), (0, np.nan, 4, 8.0), (24.0 * days - 1, end, 4, 4.0)])
    got = cluster_days(trace, place(trace, ServerShape(vcpus=16, memory_gb=64)))
    assert got.day.tolist() == list(range(WARMUP_DAYS, days))
    steady = got[got.day < days - 1]
    assert steady.cores_scheduled.tolist() == pytest.approx([18 / 32] * len(steady))
    assert steady.stranded.tolist() == pytest.approx([28 / 128] * len(steady))


def test_a_level_averages_the_cluster_days_near_it():
    days = pd.DataFrame({"cluster_id": "c", "day": range(5), "cores_scheduled": [0.72, 0.78, 0.84, 0.86, 0.5],
                         "stranded": [0.04, 0.08, 0.12, 0.10, 0.9]})
    levels = by_utilization(days)
    assert levels[75]["cluster_days"] == 2 and levels[75]["mean_pct"] == pytest.approx(6.0)
    assert levels[85]["cluster_days"] == 2 and levels[85]["mean_pct"] == pytest.approx(11.0)


def test_the_server_is_bought_from_the_warm_ups_mix():
    """Warm-up VMs rent 8 + 8 + 16 GB on 2 + 4 + 6 vCPUs: 32 / 12 GB per vCPU, x 96 vCPUs = 256 GB, whole DIMMs.
    A VM after the warm-up (64 GB on 2 vCPUs) is not known when the server is bought."""
    trace = _vms([(0, 5, 2, 8.0), (1, 5, 4, 8.0), (2, 9, 6, 16.0), (24.0 * WARMUP_DAYS + 1, np.nan, 2, 64.0)])
    server = bought_server(trace)
    assert (server.vcpus, server.memory_gb) == (96.0, 256.0)
    assert bought_server(trace.iloc[[0]]).memory_gb == 384.0      # 4 GB per vCPU: 384, already whole DIMMs
