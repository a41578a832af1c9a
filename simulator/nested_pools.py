"""A larger pool never costs more than the smaller pools it is made of.

Pools of ``k`` sockets are consecutive servers, so where ``k'`` divides ``k`` every pool of ``k``
holds whole pools of ``k'``, and a provider can run it as them: the same servers, local DRAM and
schedule, the larger pool's capacity the sum of the smaller ones'. Each pool size is sized by its own
first fit, which is not monotone in its capacities, so on its own a larger pool came out dearer on a
cluster now and then (Fig. 3's curve fell by up to a point on the default draw). Per policy and
cluster, a pool size keeps the cheaper of its own schedule and the best of the pool sizes that divide
it, in each accounting: the provider's (``required_gb``, with the local size, pool capacity, moves and
what was bought and judged) and each server and pool at its own peak (``peak_required_gb``).
``run_as_sockets`` and ``peak_run_as_sockets`` say whose schedule each row runs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# What a schedule decides, copied with it; the pool capacity is scaled to the larger pool.
SCHEDULE = ("local_gb_per_server", "gb_per_pool", "required_gb", "bought_gb", "moves", "stuck", "judged_vms",
            "judged_moves", "judged_stuck")
KEY = ["policy", "cluster"]
EPS_GB = 1e-6


def nested(table: pd.DataFrame, sockets_per_server: int) -> pd.DataFrame:
    """``table`` (``sizing.fleet_sizing``'s rows) with each pool size's row the cheapest of its own and those of
    the pool sizes that divide it, per policy and cluster and per accounting."""
    if table.empty:
        return table
    out = table.reset_index(drop=True)
    out = out.assign(run_as_sockets=out.pool_sockets, peak_run_as_sockets=out.pool_sockets)
    sizes = sorted(int(k) for k in out.pool_sockets.unique() if k > 0)
    for k in sizes:
        for small in sizes:
            if small >= k or (k // sockets_per_server) % (small // sockets_per_server):
                continue
            rows = out.index[out.pool_sockets == k].to_numpy()
            big = out.loc[rows].set_index(KEY)
            theirs = out[out.pool_sockets == small].set_index(KEY).reindex(big.index)
            cheaper = (theirs.required_gb < big.required_gb - EPS_GB).to_numpy()
            if cheaper.any():
                took = theirs[cheaper]
                out.loc[rows[cheaper], list(SCHEDULE)] = took[list(SCHEDULE)].to_numpy()
                out.loc[rows[cheaper], "gb_per_pool"] = took.gb_per_pool.to_numpy() * (k / small)
                out.loc[rows[cheaper], "run_as_sockets"] = took.run_as_sockets.to_numpy()
            peak = (theirs.peak_required_gb < big.peak_required_gb - EPS_GB).to_numpy()
            if peak.any():
                out.loc[rows[peak], "peak_required_gb"] = theirs.peak_required_gb.to_numpy()[peak]
                out.loc[rows[peak], "peak_run_as_sockets"] = theirs.peak_run_as_sockets.to_numpy()[peak]
    return out.astype({c: table[c].dtype for c in SCHEDULE if c in table}).assign(
        run_as_sockets=lambda d: d.run_as_sockets.astype(np.int64),
        peak_run_as_sockets=lambda d: d.peak_run_as_sockets.astype(np.int64))
