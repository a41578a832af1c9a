"""Pond Eq. (1) in the unit of the budget: pick the LI threshold and the UM target that put the most
memory on the pool while the *share of VMs* mispredicted on a night stays within ``1 - TP``.

Candidates are every LI threshold ``t`` and every UM target ``j``, each with "model off". For
the VMs the service will score (recent VMs with their workload history, scored by the model):

    pool(t, j)    = LI_gb(t) + (1 - LI_gb(t)) * UM_j                  (share of GB)
    mispred(t, j) = LI_vm(t) * q(t) + (1 - LI_vm(t)) * OP_j           (share of VMs)

``LI_gb``/``LI_vm``: share of GB / of VMs the model calls insensitive at ``t``, measured on the
fleet itself. ``q(t)``: the error rate among lab workloads called insensitive at ``t``
(out-of-fold), and among the fleet's measured history keys where the data set has slowdowns of
fleet VMs (``optimize.evidence``); its uncertainty is a Jeffreys posterior
Beta(k + 1/2, m - k + 1/2), so zero errors among m called workloads is a finite, shrinking bound
rather than a floor no model can pass. With fleet measurements, each draw of ``q`` is also at
least tonight's rate predicted from the measured days (``grid``'s ``li_next``). ``UM_j``: the mean over the backtest nights. ``OP_j``: the
next night's, predicted from the backtest nights with and without their trend, whichever is more
cautious (``next_night``): OP drifts over a trace, and the night to bound is tonight's.

The guarantee: the chosen pair's ``confidence`` quantile of tonight's mispredictions, over the
posterior of ``q`` and the prediction of OP (drawn jointly, seeded), is within the budget. Adding
two separate upper bounds would charge the unlikely case that both are at their worst together.

With the QoS monitor (``spare``, Pond §6.4.3), the budget bounds what it leaves slowed. Every zNUMA that
overpredicts touches its node and is flagged; the monitor mitigates flags up to its capacity, which the
LI calls' own flags (measured on the recent days, ``optimize.monitor``) spend first. So, per LI candidate,
with ``spare(t)`` the capacity those flags leave:

    left(t, j) = LI_vm(t) * q(t) + max(0, (1 - LI_vm(t)) * OP_j - spare(t))

That charges an LI error the monitor catches twice: in full, and again as the capacity its flag spends. With
``optimize.credit_caught_calls`` (``Credit``) the capacity ``cap`` is shared instead, as the replay shares it (in
order of creation, so in proportion), and a caught error is not charged:

    caught(t)   = LI_vm(t) * min(rho(t) * q(t), f_lo(t))     errors flagged: at most the recall, at most the flags
    flags(t, j) = LI_vm(t) * f_hi(t) + (1 - LI_vm(t)) * OP_j  what asks for the capacity
    m(t, j)     = min(1, cap / flags(t, j))                   the share of flags mitigated
    left(t, j)  = LI_vm(t) * q(t) - m * caught(t) + (1 - LI_vm(t)) * OP_j * (1 - m)

(with ``qos.touches: judged`` the monitor moves only the touches it judges to suffer, and the last term is
``(1 - LI_vm(t)) * OP_j``: the budget still counts the others, Pond's Eq. 1.)

``rho(t)``: the monitor model's recall, on lab workloads it never saw with the whole footprint on the pool, among
the lab's LI errors at ``t`` (its lower bound at ``confidence``; ``optimize.monitor.band_recall``): near the LI
boundary those are marginal workloads, which a recall over every run past the PDM overstates; ``f_lo``/``f_hi``: the share of the calls it flagged on the recent days (their ``1 -
confidence`` and ``confidence`` quantiles for tonight). A monitor that recalls less on the fleet than in the lab
shows it in its flags, so a caught error is never credited beyond what was flagged, and no more is mitigated than
the capacity holds: ``left >= LI_vm * q * (1 - rho)`` and ``left >= LI_vm * q + (1 - LI_vm) * OP - cap``.

The first monitor (the LI model on first-hour counters) misses most of the errors where the fleet errs most
(docs/changelog.md), so it is never credited.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class Grid:
    """Per (LI candidate, UM candidate): pool share, mean and bound of the mispredicted share; per UM candidate,
    tonight's mean OP."""
    pool: np.ndarray
    mean: np.ndarray
    bound: np.ndarray
    op: np.ndarray | None = None


def error_rate(called: np.ndarray, errors: np.ndarray) -> np.ndarray:
    """Posterior mean of the error rate among called workloads. Where the lab calls none, the prior's
    (1/2), not 0: the fleet's VMs may still be called there (their scores are not the lab's), and no
    evidence is not evidence of no error: a lab with every workload sensitive enabled LI at 0% error."""
    called, errors = np.asarray(called, float), np.asarray(errors, float)
    return (errors + 0.5) / (called + 1.0)


def charged_rate(called: np.ndarray, errors: np.ndarray, li_next: NextNight | None = None) -> np.ndarray:
    """The error rate the solver charges per LI candidate: the counts' posterior mean, or tonight's rate
    predicted from the fleet's measured days where that is more cautious (``grid``'s ``li_next``)."""
    q = error_rate(called, errors)
    return q if li_next is None else np.maximum(q, li_next.mean)


def error_draws(called: np.ndarray, errors: np.ndarray, u: np.ndarray) -> np.ndarray:
    """(candidates, draws) of the error rate: the Jeffreys posterior's quantiles at the shared
    uniforms ``u``, so that draws are comonotone across thresholds; the prior where none is called. Thresholds
    between the same lab workloads share their counts (58 distinct of 102 candidates on the built-in lab): each
    distinct pair is drawn once."""
    pairs = np.stack([np.asarray(called, float), np.asarray(errors, float)], axis=1)
    distinct, which = np.unique(pairs, axis=0, return_inverse=True)
    c, e = distinct[:, :1], distinct[:, 1:]
    return stats.beta.ppf(u[None, :], e + 0.5, np.maximum(c - e, 0.0) + 0.5)[which.reshape(-1)]


@dataclass(frozen=True)
class NextNight:
    """Per candidate, tonight's share (OP per UM target, error rate per LI threshold) as
    ``center + scale * T(df)``: a Student-t prediction."""
    center: np.ndarray
    scale: np.ndarray
    df: np.ndarray

    @property
    def mean(self) -> np.ndarray:
        return np.clip(self.center, 0.0, 1.0)

    def quantile(self, level: float) -> np.ndarray:
        return self.draws(np.array([level]))[:, 0]

    def draws(self, u: np.ndarray) -> np.ndarray:
        """(candidates, draws) at the shared uniforms ``u``: comonotone across candidates."""
        df = np.asarray(self.df, float)[:, None]
        with np.errstate(invalid="ignore"):   # 0 x inf: a candidate that never overpredicts stays at 0
            t = np.where(df > 0, stats.t.ppf(u[None, :], np.maximum(df, 1.0)),
                         np.where(u[None, :] > 0.5, np.inf, -np.inf))
            spread = np.where(self.scale[:, None] > 0, self.scale[:, None] * t, 0.0)
        return np.clip(self.center[:, None] + spread, 0.0, 1.0)


def spread(op: np.ndarray) -> NextNight:
    """The nights as draws of one distribution: their mean and s sqrt(1 + 1/n), n - 1 degrees of freedom.
    NaN (a night that says nothing of a candidate) is left out of that candidate's n; a candidate with
    fewer than two nights has no known spread: any share is possible unless it was never above 0."""
    op = np.asarray(op, float)
    n = (~np.isnan(op)).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        center = np.where(n > 0, np.nansum(op, axis=1) / np.maximum(n, 1), 0.0)
        s = np.sqrt(np.nansum((op - center[:, None]) ** 2, axis=1) / np.maximum(n - 1, 1))
    seen = np.where(n > 0, np.max(np.where(np.isnan(op), -np.inf, op), axis=1, initial=-np.inf), 0.0)
    scale = np.where(n >= 2, s * np.sqrt(1.0 + 1.0 / np.maximum(n, 1)), np.where(seen > 0, np.inf, 0.0))
    return NextNight(center, scale, np.where(n >= 2, n - 1.0, 0.0))


def _trend(op: np.ndarray, x: np.ndarray) -> NextNight:
    """A least-squares line over the days, at day 0: s sqrt(1 + 1/n + xbar^2 / Sxx), n - 2 degrees of freedom."""
    n = op.shape[1]
    xbar, sxx = x.mean(), ((x - x.mean()) ** 2).sum()
    slope = ((x - xbar)[None, :] * (op - op.mean(axis=1, keepdims=True))).sum(axis=1) / sxx
    center = op.mean(axis=1) - slope * xbar
    resid = op - (center[:, None] + slope[:, None] * x[None, :])
    s = np.sqrt((resid ** 2).sum(axis=1) / (n - 2))
    return NextNight(center, s * np.sqrt(1.0 + 1.0 / n + xbar ** 2 / sxx), np.full(len(op), n - 2.0))


def next_night(op_nights: np.ndarray, days: np.ndarray | None = None, level: float | None = None) -> NextNight:
    """Tonight's OP per UM candidate from its backtest nights (``days``: each night's day, tonight = 0):
    per candidate, the more cautious of two predictions, the one with the larger ``level`` quantile
    (the larger mean if None).

    OP at a fixed target drifted by up to 0.36 points a week over 14 nights on other draws of the
    built-in fleet, and the nights' own spread then bounds the past, not tonight: hence a line over
    the days, extrapolated (from three nights on). But a line through the first nights of a trace
    falls with their warm-up and promises tonight too little, so the nights' spread without a trend
    stays as the floor (docs/changelog.md, "Other draws of the built-in fleet")."""
    op = np.asarray(op_nights, float)
    flat = spread(op)
    if op.shape[1] < 3 or days is None:
        return flat
    return more_cautious(_trend(op, np.asarray(days, float)), flat, level)


def more_cautious(a: NextNight | None, b: NextNight | None, level: float | None) -> NextNight | None:
    """Per candidate, whichever prediction has the larger ``level`` quantile (the larger mean if None); the
    other where one is missing."""
    if a is None or b is None:
        return b if a is None else a
    pick = a.mean > b.mean if level is None else a.quantile(level) > b.quantile(level)
    return NextNight(*(np.where(pick, x, y) for x, y in ((a.center, b.center), (a.scale, b.scale), (a.df, b.df))))


@dataclass(frozen=True)
class Credit:
    """The QoS monitor's capacity shared by all it flags, caught LI errors not charged (module doc)."""
    cap: float                  # the share of tonight's VMs it may mitigate
    recall: np.ndarray | float  # rho per LI candidate: its held-out recall among the lab's LI errors, all on the pool
    flags_lo: np.ndarray        # per LI candidate, the share of the calls it flags tonight: a low quantile ...
    flags_hi: np.ndarray        # ... and a high one
    touches_mitigated: bool = True  # False (qos.touches: judged): an overpredicted zNUMA is charged whether or not
    # the monitor moves it; it still asks for the capacity (the caught calls' share is not overstated)

    def left(self, li_vm: np.ndarray, q: np.ndarray, op: np.ndarray) -> np.ndarray:
        """``left(t, j)`` (broadcast as ``_left``'s arguments; the flags per LI candidate along the first axis)."""
        lo, hi = (np.asarray(f, float)[:, None] for f in (self.flags_lo, self.flags_hi))
        caught = li_vm * np.minimum(np.reshape(np.asarray(self.recall, float), (-1, 1)) * q, lo)
        um = (1.0 - li_vm) * op
        asked = li_vm * hi + um
        m = np.where(asked > self.cap, self.cap / np.maximum(asked, 1e-12), 1.0)
        return li_vm * q - m * caught + (um * (1.0 - m) if self.touches_mitigated else um)

    def caught_share(self, i: int, li_vm: float, q: float, op: float) -> float:
        """The share of LI candidate ``i``'s errors taken as mitigated at error rate ``q`` and OP ``op``
        (``policy.json``'s ``li_errors_caught``)."""
        if li_vm * q <= 0:
            return 0.0
        rho = float(np.broadcast_to(np.asarray(self.recall, float), np.shape(self.flags_lo))[i])
        caught = li_vm * min(rho * q, float(self.flags_lo[i]))
        asked = li_vm * float(self.flags_hi[i]) + (1.0 - li_vm) * op
        return (1.0 if asked <= self.cap else self.cap / asked) * caught / (li_vm * q)


def _left(li_vm: np.ndarray, q: np.ndarray, op: np.ndarray, spare: np.ndarray | None,
          credit: Credit | None = None) -> np.ndarray:
    """Mispredicted share per (LI candidate, ...) from the LI error rate ``q`` and OP (broadcast as given):
    the zNUMA overpredictions beyond the monitor's ``spare`` capacity and every LI error, or with ``credit`` what the
    monitor's shared capacity leaves of both."""
    if credit is not None:
        return credit.left(li_vm, q, op)
    um = (1.0 - li_vm) * op
    return li_vm * q + (um if spare is None else np.maximum(um - spare, 0.0))


def grid(li_gb: np.ndarray, li_vm: np.ndarray, called: np.ndarray, errors: np.ndarray,
         um_nights: np.ndarray, op_nights: np.ndarray, level: float | None, samples: int, seed: int,
         days: np.ndarray | None = None, li_next: NextNight | None = None, spare: np.ndarray | None = None,
         credit: Credit | None = None) -> Grid:
    """Every candidate pair. ``um_nights``/``op_nights``: (UM candidates, nights); ``days``: each
    night's day relative to tonight (``next_night``). ``li_next``: per LI candidate, tonight's error rate
    predicted from the fleet's measured days (``optimize.evidence``); where given, each draw of the rate
    is the more cautious of it and the counts' posterior, as ``next_night`` keeps the more cautious OP.
    ``spare``: per LI candidate, the share of tonight's VMs the QoS monitor can still mitigate (module
    doc); None: no monitor, every misprediction counts. ``credit``: the monitor's capacity shared by all it flags
    (module doc), in place of ``spare``; None: no LI error is taken as caught."""
    li_gb, li_vm = np.asarray(li_gb, float), np.asarray(li_vm, float)
    um_nights = np.asarray(um_nights, float)
    op = next_night(op_nights, days, level)
    pool = li_gb[:, None] + (1.0 - li_gb[:, None]) * um_nights.mean(axis=1)[None, :]
    q_mean = charged_rate(called, errors, li_next)
    spare_t = None if spare is None else np.asarray(spare, float)[:, None]
    mean = _left(li_vm[:, None], q_mean[:, None], op.mean[None, :], spare_t, credit)
    if level is None:
        return Grid(pool, mean, mean, op.mean)
    rng = np.random.default_rng(seed)
    u = rng.random(samples)
    q = error_draws(called, errors, u)                                       # (T, S)
    if li_next is not None:
        q = np.maximum(q, li_next.draws(u))
    op_draws = op.draws(rng.random(samples))                                 # (J, S): tonight's OP per draw
    bound = np.empty_like(mean)
    for j in range(op_draws.shape[0]):   # a dozen UM candidates; each a (T, S) array
        draws = _left(li_vm[:, None], q, op_draws[j][None, :], spare_t, credit)
        bound[:, j] = np.quantile(draws, level, axis=1)
    return Grid(pool, mean, bound, op.mean)


def best(pool: np.ndarray, bound: np.ndarray, budget: float) -> tuple[int, int] | None:
    """The feasible pair with the most pool (ties: the smaller bound, then the first); None if none.
    A pair whose pool share is not a number (a UM night without that target) is not feasible: one such
    pair must not turn every other away, as the max of a grid holding NaN would."""
    ok = (bound <= budget + 1e-12) & np.isfinite(pool)
    if not ok.any():
        return None
    value = np.where(ok, pool, -np.inf)
    top = value >= value.max() - 1e-12
    i, j = np.unravel_index(int(np.argmin(np.where(top, bound, np.inf))), pool.shape)
    return int(i), int(j)


def regret(pool: np.ndarray, mispredicted: np.ndarray, budget: float, chosen: tuple[int, int]) -> dict[str, float]:
    """Hindsight-best realized pool share within the budget on one night, minus the chosen pair's.
    ``pool``/``mispredicted``: realized per candidate pair on that night's VMs."""
    b = best(pool, mispredicted, budget)
    best_pool = float(pool[b]) if b is not None else 0.0
    got = float(pool[chosen])
    return {"hindsight_pool": best_pool, "chosen_pool": got, "regret": best_pool - got,
            "hindsight_li_index": b[0] if b else -1, "hindsight_um_index": b[1] if b else -1}


def called_shares(p: np.ndarray, known: np.ndarray, memory_gb: np.ndarray, thresholds: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Per threshold t, the share of VMs and of GB with ``known`` and ``p >= t``: sums over the VMs in
    score order, not a thresholds x VMs matrix (102 x 840,000 floats at 10M VMs)."""
    called = known & ~np.isnan(p)
    order = np.argsort(p[called], kind="stable")
    scores = p[called][order]
    gb_from = np.r_[np.cumsum(memory_gb[called][order][::-1])[::-1], 0.0]   # GB of the VMs from rank k on
    first = np.searchsorted(scores, np.asarray(thresholds, float), side="left")
    return (len(scores) - first) / len(p), gb_from[first] / memory_gb.sum()
