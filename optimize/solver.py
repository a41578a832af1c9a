"""Pond Eq. (1): pick the LI threshold and the UM target that put the most memory on the pool
within the misprediction budget, solved exactly on the held-out (step-function) curves.

Shares are of *all* VMs. A share ``h`` of VMs has workload history, so the LI model can send
``h * LI`` of VMs entirely to the pool; every other VM gets a zNUMA sized by the UM model::

    pool(i, j)   = h * LI_i + (1 - h * LI_i) * UM_j
    mispred(i, j) = h * FP_i + (1 - h * LI_i) * OP_j   <=  1 - TP

LI/FP and UM/OP are candidates from the two curves, with "do not use the model" (0, 0) always
among them. For each LI candidate the best UM is the largest UM whose OP fits the remaining
budget: one binary search over the UM curve sorted by OP, so the solve is exact and O(n log n).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

EPS = 1e-12


@dataclass(frozen=True)
class Choice:
    li_index: int
    um_index: int
    pool: float
    mispredictions: float

    @property
    def feasible(self) -> bool:
        return self.li_index >= 0


def pool_share(h: float, li: np.ndarray, um: np.ndarray) -> np.ndarray:
    return h * li + (1.0 - h * li) * um


def mispredicted(h: float, li: np.ndarray, fp: np.ndarray, op: np.ndarray) -> np.ndarray:
    return h * fp + (1.0 - h * li) * op


def _best_um_by_op(um: np.ndarray, op: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """UM candidates sorted by OP, with the running best UM and the index achieving it."""
    order = np.argsort(op, kind="stable")
    um_sorted = um[order]
    best = np.maximum.accumulate(um_sorted)
    previous = np.r_[-np.inf, best[:-1]]
    # position of the running best: where UM last strictly improved (ties keep the smaller OP)
    pos = np.maximum.accumulate(np.where(um_sorted > previous, np.arange(len(order)), 0))
    return op[order], best, order[pos]


def solve(li: np.ndarray, fp: np.ndarray, um: np.ndarray, op: np.ndarray, h: float, budget: float) -> Choice:
    """Exact optimum over all (LI, UM) candidate pairs; infeasible -> Choice(-1, -1, 0, inf)."""
    li, fp, um, op = (np.asarray(a, dtype=float) for a in (li, fp, um, op))
    op_sorted, best_um, best_arg = _best_um_by_op(um, op)
    rest = 1.0 - h * li
    with np.errstate(divide="ignore", invalid="ignore"):
        op_room = np.where(rest > EPS, (budget - h * fp) / rest, np.where(budget - h * fp >= -EPS, np.inf, -np.inf))
    k = np.searchsorted(op_sorted, op_room + EPS, side="right") - 1
    ok = (k >= 0) & (h * fp <= budget + EPS)
    if not ok.any():
        return Choice(-1, -1, 0.0, float("inf"))
    j = np.where(ok, best_arg[np.maximum(k, 0)], 0)
    value = np.where(ok, pool_share(h, li, um[j]), -np.inf)
    i = int(np.argmax(value))
    return Choice(i, int(j[i]), float(value[i]), float(mispredicted(h, li[i], fp[i], op[j[i]])))


def solve_brute_force(li, fp, um, op, h: float, budget: float) -> Choice:
    """Every pair: the test oracle."""
    li, fp, um, op = (np.asarray(a, dtype=float) for a in (li, fp, um, op))
    pool = pool_share(h, li[:, None], um[None, :])
    mis = mispredicted(h, li[:, None], fp[:, None], op[None, :])
    pool = np.where(mis <= budget + EPS, pool, -np.inf)
    if not np.isfinite(pool).any():
        return Choice(-1, -1, 0.0, float("inf"))
    i, j = np.unravel_index(int(np.argmax(pool)), pool.shape)
    return Choice(int(i), int(j), float(pool[i, j]), float(mis[i, j]))


def solve_milp(li, fp, um, op, h: float, budget: float) -> Choice:
    """The same problem as a MILP over pair indicators (scipy.optimize.milp): a second oracle."""
    li, fp, um, op = (np.asarray(a, dtype=float) for a in (li, fp, um, op))
    pool = pool_share(h, li[:, None], um[None, :]).ravel()
    mis = mispredicted(h, li[:, None], fp[:, None], op[None, :]).ravel()
    cons = [optimize.LinearConstraint(np.ones((1, pool.size)), 1, 1),
            optimize.LinearConstraint(mis[None, :], -np.inf, budget + EPS)]
    res = optimize.milp(-pool, constraints=cons, integrality=np.ones(pool.size), bounds=optimize.Bounds(0, 1))
    if not res.success:
        return Choice(-1, -1, 0.0, float("inf"))
    flat = int(np.argmax(res.x))
    i, j = divmod(flat, len(um))
    return Choice(i, j, float(pool[flat]), float(mis[flat]))


def clopper_pearson_upper(k: np.ndarray, n: np.ndarray | int, level: float) -> np.ndarray:
    """One-sided upper confidence bound of a rate seen as k events in n trials."""
    k, n = np.asarray(k, dtype=float), np.broadcast_to(np.asarray(n, dtype=float), np.shape(k))
    upper = stats.beta.ppf(level, k + 1, np.maximum(n - k, 1e-12))
    return np.where(k >= n, 1.0, np.where(n > 0, upper, 1.0))
