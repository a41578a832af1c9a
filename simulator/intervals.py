"""How sure a DRAM-saved figure is: a bootstrap over clusters.

A provider buys DRAM per cluster (servers and pools never span two), so clusters are the units a saving is made
of, and the ones a fleet draws anew: another region's clusters, another month's. Days are not resampled: a
cluster's days share its long-lived VMs and the DRAM bought for all of them, so they are not independent draws.
Each draw takes the fleet's clusters with replacement (the same draws for every policy), and a saving is
``1 - sum(policy GB) / sum(all-local GB)`` over the clusters drawn; the interval is the draws' central
``level`` share. Two policies are compared on the same draws (paired): their difference's interval says whether
one saves more than the other beyond what the choice of clusters moves.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def cluster_draws(n_clusters: int, draws: int, seed: int) -> np.ndarray:
    """(draws, n_clusters): how many times each cluster is taken in each draw (with replacement)."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters), size=draws).astype(float)


class Savings:
    """Per (policy, pool size), the savings of every draw, from the per-cluster sizing table (``simulate``'s
    ``sizing_by_cluster``): ``required_gb`` (the deciding accounting) or ``peak_required_gb`` (Pond's)."""

    def __init__(self, table: pd.DataFrame, column: str, weights: np.ndarray, level: float) -> None:
        self.column, self.weights, self.level = column, weights, level
        self.clusters = np.sort(table.cluster.unique())
        base = table[table.policy == "all_local"].set_index("cluster")[column].reindex(self.clusters, fill_value=0.0)
        self.base = weights @ base.to_numpy(float)
        self.by_row = {key: g.set_index("cluster")[column].reindex(self.clusters, fill_value=0.0).to_numpy(float)
                       for key, g in table[table.policy != "all_local"].groupby(["policy", "pool_sockets"], sort=False)}

    def draws(self, policy: str, pool_sockets: int) -> np.ndarray:
        """The saving in each draw; all local (no pool) saves 0 in every draw."""
        if not pool_sockets:
            return np.zeros(len(self.weights))
        gb = self.weights @ self.by_row[(policy, pool_sockets)]
        return np.where(self.base > 0, 1.0 - gb / np.where(self.base > 0, self.base, 1.0), 0.0)

    def interval(self, policy: str, pool_sockets: int) -> tuple[float, float]:
        return percentiles(self.draws(policy, pool_sockets), self.level)

    def difference(self, a: tuple[str, int], b: tuple[str, int]) -> tuple[float, float]:
        """The interval of ``a``'s saving minus ``b``'s, on the same draws."""
        return percentiles(self.draws(*a) - self.draws(*b), self.level)


def percentiles(x: np.ndarray, level: float) -> tuple[float, float]:
    tail = 100.0 * (1.0 - level) / 2.0
    lo, hi = np.percentile(x, [tail, 100.0 - tail])
    return round(float(lo), 5), round(float(hi), 5)


def with_intervals(fleet: pd.DataFrame, savings: Savings, peaks: Savings, kept: Savings | None = None
                   ) -> pd.DataFrame:
    """The fleet table with each row's savings interval, in both accountings (and at the peaks on all local's
    placement, ``kept``, where given)."""
    columns = {"savings": savings, "savings_per_server_peaks": peaks} | ({"savings_kept_placement": kept} if kept
                                                                         else {})
    got: dict[str, list[float]] = {}
    for name, s in columns.items():
        both = [s.interval(policy, int(k)) for policy, k in zip(fleet.policy, fleet.pool_sockets)]
        got[f"{name}_lo"], got[f"{name}_hi"] = [b[0] for b in both], [b[1] for b in both]
    return fleet.assign(**got)
