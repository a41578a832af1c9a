"""The pool simulator on traces small enough to work out by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pond.simulator.packing import ServerShape, first_fit
from pond.simulator.pool_sim import Placement, SimParams, Sweep, place
from pond.simulator.sizing import Question, Trace, fleet_sizing

# Servers of 4 vCPUs and 10 GB. a runs 0-10 s with 6 GB; b (5-9 s, 6 GB) cannot join a (4 GB
# free) and opens server 1; c arrives at 10 s, the second a leaves (departures go first), so it
# takes server 0; d (12-30 s) still fits beside c on server 0.
TRACE = pd.DataFrame({"vm_id": list("abcd"), "cluster_id": "c0", "server_id": pd.Series([pd.NA] * 4, dtype="string"),
                      "vcpus": [2, 2, 2, 2], "memory_gb": [6.0, 6.0, 4.0, 4.0]})
START, END = np.array([0, 5, 10, 12]), np.array([10, 9, 15, 30])
SHAPE = SimParams(socket_vcpus=2, socket_memory_gb=5, sockets_per_server=2, packing="first_fit")


def test_first_fit_by_hand() -> None:
    server, oversized = first_fit(START, END, TRACE.vcpus.to_numpy(), TRACE.memory_gb.to_numpy(), ServerShape(4, 10))
    assert server.tolist() == [0, 1, 0, 0]
    assert not oversized.any()


def test_first_fit_cores_bind_and_oversized_vm_gets_its_own_server() -> None:
    # x and y use all 4 vCPUs of server 0, so z opens server 1; w (12 GB) is larger than a server.
    server, oversized = first_fit(np.array([0, 0, 1, 2]), np.array([9, 9, 9, 9]), np.array([2, 2, 1, 1]),
                                  np.array([1.0, 1.0, 1.0, 12.0]), ServerShape(4, 10))
    assert server.tolist() == [0, 0, 1, 2]
    assert oversized.tolist() == [False, False, False, True]


def test_best_fit_packs_the_server_its_cores_leave_fullest() -> None:
    # a (2 vCPUs) opens server 0; b (3) does not fit beside it and opens server 1 (1 left); c (1 vCPU) fits
    # both: first fit takes the lowest number, best fit the server it fills (1 free -> 0), as production packs.
    start, end, cores, mem = np.array([0, 1, 2]), np.array([9, 9, 9]), np.array([2, 3, 1]), np.ones(3)
    assert first_fit(start, end, cores, mem, ServerShape(4, 10))[0].tolist() == [0, 1, 0]
    assert first_fit(start, end, cores, mem, ServerShape(4, 10), "best_fit")[0].tolist() == [0, 1, 1]
    mem = np.array([1.0, 2.0, 9.0])          # memory binds too: c's 9 GB fit server 0 (9 free), not 1 (8)
    assert first_fit(start, end, cores, mem, ServerShape(4, 10), "best_fit")[0].tolist() == [0, 1, 0]


def test_zero_length_vm_is_placed_and_freed() -> None:
    server, _ = first_fit(np.array([5, 5]), np.array([5, 6]), np.array([4, 4]), np.array([1.0, 1.0]), ServerShape(4, 10))
    assert server.tolist() == [0, 1]    # it holds its server for one second


def test_sweep_peaks_by_hand() -> None:
    sweep = Sweep(START, END)
    group = np.array([0, 1, 0, 0])
    assert sweep.peaks("s", group, TRACE.memory_gb.to_numpy()).tolist() == [8.0, 6.0]   # c + d on server 0
    # all four in one group: a+b = 12 at 5-9 s beats c+d+... = 8
    assert sweep.peaks("all", np.zeros(4, int), TRACE.memory_gb.to_numpy()).tolist() == [12.0]


def _lower_bound(placement, start, end, memory, policies, sockets):
    """fleet_sizing's per-server-peak figures (every server and pool at its own peak) over the whole trace."""
    out = fleet_sizing(Trace(start, end, placement.cluster, placement.host, np.ones(len(start)), memory), policies,
                       Question(placement.sockets_per_host, sockets, (0, int(end.max()) + 1), 4.0, 1.0))
    return out.groupby(["policy", "pool_sockets"], sort=False).peak_required_gb.sum()


def test_per_server_peaks_by_hand() -> None:
    placement = place(TRACE, START, END, SHAPE)
    assert (placement.assignment, placement.host.tolist(), placement.sockets_per_host) == ("first_fit", [0, 1, 0, 0], 2)
    half = np.floor(0.5 * TRACE.memory_gb.to_numpy())            # 3, 3, 2, 2 GB on the pool
    out = _lower_bound(placement, START, END, TRACE.memory_gb.to_numpy(), {"half": half}, (2, 4))
    # all local: server peaks 8 + 6 = 14.  Local halves: max(3, 2+2) + 3 = 7.
    # 2-socket pools = one server each: pool peaks 4 + 3 = 7 -> 14 GB, no saving.
    # 4-socket pool spans both servers: 3 (0-5 s), 6 (5-9), 3, 2, 4 (12-15), 2 -> peak 6 -> 13 GB.
    assert out[("all_local", 0)] == 14.0 and out[("half", 2)] == 14.0 and out[("half", 4)] == 13.0


def test_peaks_within_a_window_start_from_the_level_carried_in() -> None:
    sweep = Sweep(START, END)
    group = np.zeros(4, int)
    # from 11 s on: c (10-15) is alive, then d joins at 12: 8; a+b's 12 GB at 5-9 s is before the window
    assert sweep.peaks("all", group, TRACE.memory_gb.to_numpy(), (11, 40)).tolist() == [8.0]
    # from 6 s to 8 s: a and b are both alive when it starts, nothing arrives: the carried 12
    assert sweep.peaks("all", group, TRACE.memory_gb.to_numpy(), (6, 8)).tolist() == [12.0]


def test_trace_servers_are_used_and_pools_never_split_a_server() -> None:
    trace = TRACE.assign(server_id=["s1", "s2", "s1", "s1"])
    placement = place(trace, START, END, SHAPE)
    assert placement.assignment == "trace" and placement.host.tolist() == [0, 1, 0, 0]
    placement = Placement(placement.cluster, placement.host, 4, "trace", 0)   # 4-socket servers
    out = _lower_bound(placement, START, END, TRACE.memory_gb.to_numpy(), {"none": np.zeros(4)}, (2, 4, 8))
    assert [k for _, k in out.index] == [0, 4, 8]
    assert (out == out[("all_local", 0)]).all()


def test_pools_stay_within_a_cluster() -> None:
    two = pd.concat([TRACE, TRACE.assign(vm_id=list("efgh"), cluster_id="c1")], ignore_index=True)
    start, end = np.r_[START, START], np.r_[END, END]
    placement = place(two, start, end, SHAPE)
    out = _lower_bound(placement, start, end, two.memory_gb.to_numpy(),
                       {"half": np.floor(0.5 * two.memory_gb.to_numpy())}, (64,))
    # each cluster is the by-hand case: 28 GB all-local, 2 x 13 GB pooled
    assert out[("all_local", 0)] == 28.0 and out[("half", 64)] == 26.0
