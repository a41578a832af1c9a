"""A larger pool never costs more than the smaller pools it is made of (``simulator.nested_pools``)."""

from __future__ import annotations

import pandas as pd

from pond.simulator.nested_pools import nested


def _row(k: int, local: float, pool: float, servers: int, peak: float, moves: int = 0) -> dict:
    spp = max(k // 2, 1)
    units = servers / spp if k else 0.0
    return {"policy": "p" if k else "all_local", "pool_sockets": k, "cluster": 0, "window_vms": 100,
            "servers": servers, "pools": -(-servers // spp) if k else 0, "pool_units": units,
            "local_gb_per_server": local, "gb_per_pool": pool, "required_gb": servers * local + units * pool,
            "moves": moves, "stuck": 0, "peak_required_gb": peak, "bought_gb": servers * local + units * pool,
            "judged_vms": 100, "judged_moves": moves, "judged_stuck": 0}


def test_a_dearer_larger_pool_runs_the_schedule_of_a_pool_size_that_divides_it():
    """12 two-socket servers. 4-socket pools: L 100, P 40 (2 servers a pool): 12 x 100 + 6 x 40 = 1440 GB. Its
    own first fit at 8 sockets found L 110, P 60: 12 x 110 + 3 x 60 = 1500, dearer, so it runs as two 4-socket
    pools: L 100, P 80 per 8-socket pool, 1440 GB, with their moves. 6 sockets is not a multiple of 4: its own,
    though dearer. Each server and pool at its own peak is taken apart: 8 sockets' own schedule peaks lower."""
    table = pd.DataFrame([_row(0, 130, 0, 12, 1400), _row(4, 100, 40, 12, 1300, moves=1),
                          _row(6, 120, 50, 12, 1350), _row(8, 110, 60, 12, 1250, moves=0)])
    out = nested(table, 2).set_index("pool_sockets")
    assert (out.loc[8, "local_gb_per_server"], out.loc[8, "gb_per_pool"], out.loc[8, "required_gb"],
            out.loc[8, "moves"], out.loc[8, "run_as_sockets"]) == (100, 80, 1440, 1, 4)
    assert (out.loc[8, "peak_required_gb"], out.loc[8, "peak_run_as_sockets"]) == (1250, 8)
    assert (out.loc[6, "required_gb"], out.loc[6, "run_as_sockets"]) == (12 * 120 + 4 * 50, 6)
    assert (out.loc[4, "run_as_sockets"], out.loc[0, "run_as_sockets"]) == (4, 0)
    assert out.loc[8, "pools"] == 3 and out.loc[8, "pool_units"] == 3.0     # the larger pools' hardware is kept
    assert out.moves.dtype == table.moves.dtype


def test_a_schedule_passes_down_the_chain_and_clusters_stay_apart():
    """2 -> 4 -> 8 sockets: 8 runs 2's schedule where 4 already did; another cluster keeps its own."""
    rows = [_row(2, 100, 20, 8, 960), _row(4, 100, 60, 8, 900), _row(8, 100, 200, 8, 980)]
    other = [dict(_row(k, 100, 10 * k, 8, 900), cluster=1) for k in (2, 4, 8)]
    out = nested(pd.DataFrame(rows + other), 2).set_index(["cluster", "pool_sockets"])
    assert [out.loc[(0, k), "run_as_sockets"] for k in (2, 4, 8)] == [2, 2, 2]
    assert [out.loc[(0, k), "gb_per_pool"] for k in (2, 4, 8)] == [20, 40, 80]
    assert [out.loc[(0, k), "peak_run_as_sockets"] for k in (2, 4, 8)] == [2, 4, 4]
    assert [out.loc[(1, k), "run_as_sockets"] for k in (2, 4, 8)] == [2, 4, 8]
