"""Where the regret of a 14-night backtest comes from. After `benchmarks/backtest_variants.py`:

    python -m benchmarks.analyses.regret_anatomy [--workdir /tmp/pond-backtest-variants] [--variants pond walks]

Per variant, from the saved nights (no model is trained again):
- the best *fixed* threshold pair in hindsight: the one pair that, used on every night, gives the most mean
  realized pool share with at least k of the n nights within the budget, and its mean regret. No nightly solver
  that does not see the outcomes can be expected to beat it by much;
- the error rate among the VMs the LI model calls insensitive, realized on the fleet's next days (slowdown truth of
  the built-in fleet), the same with each called workload counted once (the lab counts each workload once; the
  fleet's budget counts VMs, so which workloads are popular weighs in) and split between VMs running a workload of
  the lab and the others (the forest was fit on the former), beside the lab's out-of-fold estimate the solver must
  use at the same threshold, and beside that estimate re-weighted to the fleet's scores (the lab's error rate per
  0.1-wide score bin, Jeffreys mean, weighted by the fleet's called VMs in each bin): does a shift in where the
  fleet's scores fall explain the gap?
- and the lab's error rate re-weighted by a covariate-shift density ratio in the LI feature space (fleet VMs with
  history in the week before each night, as `optimize` reads them, against the lab workloads), two ways: each lab
  workload weighted by the fleet VMs whose nearest lab workload it is (standardized features), and by a logistic
  regression's odds of "fleet" (C = 1). Each lab workload keeps its out-of-fold score, recomputed as `train_li` does;
- the solver re-run on each night (as `optimize` does, same inputs), with every UM backtest night and without the
  ones near the start of the trace: a night trained on creations no older than its calibration block learns from
  short-lived VMs only (the bias the calibration lag avoids), so its OP overstates tonight's model's. Is that the
  cost of the first nights? And at each ``optimize.confidence``: does spending the budget differently buy it back?
- and at the params' confidence with tonight's outcomes given to it in hindsight: the error rate among the VMs
  called insensitive, tonight's OP per UM target, or both. How much of the regret is each half's uncertainty?
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pond.core.params import Params, load
from pond.evaluation.regret import realized_grid
from pond.features.history import KEY
from pond.models.li import training_set
from pond.models.li_select import candidates, oof_scores
from pond.optimize.solver import NextNight, best, error_rate
from pond.optimize.tonight import choose, fleet_evidence, li_candidates, li_model, recent_li_shares, um_candidates
from pond.telemetry.io import read_tables

CONFIDENCE_LEVELS = (None, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95)


@dataclass(frozen=True)
class Night:
    """One saved backtest night with what `optimize` read and what its next day realized."""
    params: Params
    li_vm: np.ndarray
    li_gb: np.ndarray
    um_nights: pd.DataFrame
    pool: np.ndarray          # realized pool share per candidate pair
    mis: np.ndarray           # realized mispredicted share per candidate pair
    hindsight: float          # the night's hindsight-best realized pool share within the budget
    decisions: pd.DataFrame
    history: pd.DataFrame
    offsets: np.ndarray       # the UM candidates' conformal offsets (NaN: UM off)
    li: pd.DataFrame          # what `optimize` charged that night: the lab's counts plus the fleet's reports, if any
    li_next: NextNight | None = None   # the fleet's measured days (`optimize.tonight.FleetEvidence.tonight`), if any


@dataclass(frozen=True)
class Replay:
    li: pd.DataFrame          # the lab's LI candidates (threshold, called, errors)
    q: np.ndarray             # the lab's error rate among called workloads
    budget: float
    model: dict
    nights: list[Night]

    def resolve(self, night: Night, params: Params | None = None, li: pd.DataFrame | None = None,
                um_nights: pd.DataFrame | None = None) -> tuple[float, float]:
        """(realized pool share, realized mispredictions) of the pair the solver chooses with these inputs."""
        c = choose(params or night.params, night.li if li is None else li, night.li_vm, night.li_gb,
                   night.um_nights if um_nights is None else um_nights, night.li_next if li is None else None)[1]
        return float(night.pool[c]), float(night.mis[c])

    def resolve_um_only(self, night: Night, params: Params | None = None, um_nights: pd.DataFrame | None = None
                        ) -> tuple[float, float]:
        """The same for the UM-only alternative (LI off), what the service applies by default."""
        j = choose(params or night.params, self.li.iloc[:1], np.zeros(1), np.zeros(1),
                   night.um_nights if um_nights is None else um_nights)[1][1]
        return float(night.pool[0, j]), float(night.mis[0, j])


def replay(wd: Path) -> Replay:
    """Every saved night of ``wd``'s backtest, with `optimize`'s inputs recomputed as it computes them."""
    params = load(wd / "params.yaml")
    o = params.optimize
    budget = o.budget
    li = li_candidates(pd.read_parquet(wd / "li" / "heldout_curves.parquet"), o.latency_ratio, o.pdm)
    thresholds = li.threshold.to_numpy(float)
    q = error_rate(li.called.to_numpy(), li.errors.to_numpy())
    model = li_model(wd / "li", o.latency_ratio, o.pdm)
    nights = []
    for night in sorted(d for d in (wd / "backtest").iterdir() if (d / "policy.json").exists()):
        um_nights = pd.read_parquet(night / "um" / "heldout_nights.parquet")
        targets, _, _ = um_candidates(um_nights)
        offsets = json.loads((night / "um" / "manifest.json").read_text())["offsets"]
        off = np.r_[np.nan, [offsets[f"{t:g}"] for t in targets[1:]]]
        d = pd.read_parquet(night / "evaluation" / "decisions.parquet")
        pool, m = realized_grid(d, thresholds, off, q)
        p = params.with_as_of(night.name)
        history = pd.read_parquet(night / "features" / "snapshot" / "workload_history.parquet")
        li_vm, li_gb, _ = recent_li_shares(p, wd / "features" / "vm_features.parquet", history, wd / "li", model,
                                           thresholds)
        fleet = fleet_evidence(p, wd / "raw", wd / "features" / "vm_features.parquet", history, wd / "li", model,
                               thresholds)
        b = best(pool, m, budget)
        nights.append(Night(p, li_vm, li_gb, um_nights, pool, m, float(pool[b]) if b is not None else 0.0, d, history,
                            off, fleet.add_to(li), fleet.tonight))
    return Replay(li, q, budget, model, nights)


def summary(r: Replay, got: list[tuple[float, float]]) -> str:
    """Mean regret, nights within the budget and mean pool share of one realized (pool, mispredictions) per night."""
    pool, m = np.array([g[0] for g in got]), np.array([g[1] for g in got])
    h = np.array([n.hindsight for n in r.nights])
    return (f"mean regret {100 * (h - pool).mean():.2f} points, {int((m <= r.budget + 1e-12).sum())}/{len(got)} nights "
            f"within the budget (worst {100 * m.max():.2f}%), pool {100 * pool.mean():.2f}%")


def anatomy(wd: Path) -> None:
    r = replay(wd)
    params = r.nights[0].params
    o, u, li, q, budget = params.optimize, params.train_um, r.li, r.q, r.budget
    thresholds = li.threshold.to_numpy(float)
    start = pd.read_parquet(wd / "features" / "vm_features.parquet", columns=["created_at"]).created_at.min()
    warm_from = start.normalize().tz_localize(None) + pd.Timedelta(days=u.calib_lag_days + u.calib_days)
    targets = um_candidates(r.nights[0].um_nights)[0]
    pools, mis = [n.pool for n in r.nights], [n.mis for n in r.nights]
    hindsight, decisions = [n.hindsight for n in r.nights], [n.decisions for n in r.nights]
    P, M, H = np.array(pools), np.array(mis), np.array(hindsight)
    n = len(P)
    print(f"{wd.name}: {n} nights; nightly hindsight-best pool {100 * H.mean():.2f}% on average")
    for k in (n, n - 1):
        ok = (M <= budget + 1e-12).sum(axis=0) >= k
        value = np.where(ok, P.mean(axis=0), -1.0)
        i, j = np.unravel_index(int(value.argmax()), value.shape)
        print(f"  best fixed pair with >= {k}/{n} nights within the budget: LI threshold {thresholds[i]:g}, "
              f"UM target {targets[j]:g}: pool {100 * P[:, i, j].mean():.2f}%, mean regret "
              f"{100 * (H - P[:, i, j]).mean():.2f} points, worst night {100 * M[:, i, j].max():.2f}%")
    for name, only_warm in (("every UM backtest night", False), (f"the UM nights from {warm_from.date()} only", True)):
        got, used = [], []
        for night in r.nights:
            um = night.um_nights
            warm = um[pd.to_datetime(um.as_of) >= warm_from]
            um = warm if only_warm and len(warm) else um   # a night with none of them keeps every night
            got.append(r.resolve(night, um_nights=um)), used.append(um.as_of.nunique())
        print(f"  the solver again, with {name}: {summary(r, got)}, {min(used)}-{max(used)} UM nights a night")
    for level in CONFIDENCE_LEVELS:   # optimize.confidence; None: the mean
        got = [r.resolve(night, params=with_confidence(night.params, level)) for night in r.nights]
        print(f"  the solver again at optimize.confidence {level}: {summary(r, got)}")
    for name, li_known, op_known in (("tonight's LI error rate known", True, False),
                                     ("tonight's OP known", False, True), ("both known", True, True)):
        got = [r.resolve(night, li=known_li(r, night) if li_known else None,
                         um_nights=known_op(night) if op_known else None) for night in r.nights]
        print(f"  the solver again at optimize.confidence {o.confidence}, {name}: {summary(r, got)}")
    d = pd.concat(decisions, ignore_index=True)
    workload = d[["vm_id"]].merge(pd.read_parquet(wd / "raw" / "vms.parquet", columns=["vm_id", "workload_id"]),
                                  on="vm_id", how="left").workload_id   # evaluation only: the fleet's truth link
    p, h, s = d.p_insensitive.to_numpy(float), d.has_history.to_numpy(bool), d.sensitive.to_numpy(float)
    in_bin = li.called.to_numpy(float) - np.r_[li.called.to_numpy(float)[1:], 0.0]   # lab workloads per threshold step
    err_bin = li.errors.to_numpy(float) - np.r_[li.errors.to_numpy(float)[1:], 0.0]
    lab_scores, sensitive, weights = density_ratio(wd, nights=[n for n in sorted((wd / "backtest").iterdir())
                                                                if (n / "policy.json").exists()])
    in_lab = workload.isin(read_tables(wd / "raw", ["workloads"])["workloads"].workload_id).to_numpy()
    print("  threshold | VMs called | fleet error rate among them | each called workload once | "
          "VMs of lab workloads / of the others | lab called / errors | lab estimate | "
          "re-weighted to the fleet's scores | density ratio: nearest lab workload, logistic")
    for t in (0.4, 0.5, 0.6, 0.7, 0.77, 0.8, 0.9):
        called = h & (p >= t)
        k = int(np.argmin(abs(thresholds - t)))
        lo = np.arange(t, 1.0 - 1e-9, 0.1)
        hi = np.r_[lo[1:], 1.01]
        rate = [error_rate(in_bin[(thresholds >= a - 1e-9) & (thresholds < b - 1e-9)].sum(),
                           err_bin[(thresholds >= a - 1e-9) & (thresholds < b - 1e-9)].sum()) for a, b in zip(lo, hi)]
        weight = [int((called & (p >= a) & (p < b)).sum()) for a, b in zip(lo, hi)]
        once = pd.Series(s[called]).groupby(workload[called].to_numpy()).mean().mean()
        print(f"  {t:9.2f} | {called.mean():10.3f} | {np.nanmean(s[called]):27.4f} | {once:25.4f} | "
              f"{np.nanmean(s[called & in_lab]):.4f} / {np.nanmean(s[called & ~in_lab]):.4f}               | "
              f"{int(li.called[k]):6d} / {int(li.errors[k]):d}    | {q[k]:.4f}       | "
              f"{np.average(rate, weights=weight) if sum(weight) else float('nan'):.4f}                            | "
              + ", ".join(f"{_weighted_rate(lab_scores >= t, sensitive, w):.4f}" for w in weights))


def known_li(r: Replay, night: Night, weight: float = 1e7) -> pd.DataFrame:
    """The lab's LI candidates with the next day's realized error rate among the VMs called at each
    threshold in their place, as if ``weight`` workloads had shown it: what fleet labels could tell at most."""
    d = night.decisions
    p, h, s = d.p_insensitive.to_numpy(float), d.has_history.to_numpy(bool), d.sensitive.to_numpy(float)
    rate = np.array([np.nanmean(s[h & (p >= t)]) if (h & (p >= t) & ~np.isnan(s)).any() else 0.0
                     for t in r.li.threshold.to_numpy(float)])   # ~100 thresholds over one day's VMs
    called = np.where(r.li.called.to_numpy() > 0, weight, 0.0)
    return r.li.assign(called=called, errors=called * rate)


def known_op(night: Night) -> pd.DataFrame:
    """The UM backtest nights with each target's OP replaced by the one the next day realized (UM only):
    tonight's OP known exactly, its expected UM share unchanged."""
    targets = um_candidates(night.um_nights)[0]
    realized = dict(zip(targets[1:], night.mis[0, 1:]))
    return night.um_nights.assign(op=night.um_nights.target_op.map(realized))


def with_confidence(params: Params, level: float | None) -> Params:
    return params.model_copy(update={"optimize": params.optimize.model_copy(update={"confidence": level})})


def _weighted_rate(called: np.ndarray, sensitive: np.ndarray, w: np.ndarray) -> float:
    return float((w[called] * sensitive[called]).sum() / w[called].sum()) if w[called].sum() > 0 else float("nan")


def density_ratio(wd: Path, nights: list[Path], max_fleet: int = 20000) -> tuple[np.ndarray, np.ndarray, list]:
    """(the lab workloads' out-of-fold scores, 1 = sensitive, [nearest-neighbour weights, logistic odds])."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    params = load(wd / "params.yaml")
    o, p = params.optimize, params.train_li
    feats = pd.read_parquet(wd / "features" / "workload_features.parquet")
    X, y, names, ids = training_set(feats, read_tables(wd / "raw", ["slowdowns"])["slowdowns"], o.latency_ratio, o.pdm)
    method = li_model(wd / "li", o.latency_ratio, o.pdm)["method"]
    scores = oof_scores(candidates(names)[method], X, y, np.asarray(ids, dtype=object), p.cv_folds, params.base.seed,
                        p.oof_repeats)
    vmf = pd.read_parquet(wd / "features" / "vm_features.parquet", columns=[*KEY, "created_at", "has_history"])
    rows = []
    for night in nights:
        end = pd.Timestamp(night.name, tz="UTC") + pd.Timedelta(days=1)
        recent = vmf[(vmf.created_at >= end - pd.Timedelta(days=o.recent_days)) & (vmf.created_at < end)
                     & vmf.has_history]
        hist = pd.read_parquet(night / "features" / "snapshot" / "workload_history.parquet")
        rows.append(recent[list(KEY)].merge(hist, on=list(KEY)).reindex(columns=names).to_numpy(np.float32))
    fleet = np.vstack(rows)
    fleet = fleet[~np.isnan(fleet).all(axis=1)]
    fleet = fleet[np.random.default_rng(params.base.seed).choice(len(fleet), min(len(fleet), max_fleet), replace=False)]
    scaler = StandardScaler().fit(np.vstack([np.nan_to_num(X), np.nan_to_num(fleet)]))
    lab, fl = scaler.transform(np.nan_to_num(X)), scaler.transform(np.nan_to_num(fleet))
    nearest = ((fl ** 2).sum(1)[:, None] - 2 * fl @ lab.T + (lab ** 2).sum(1)[None, :]).argmin(axis=1)
    knn = np.bincount(nearest, minlength=len(lab)).astype(float)
    clf = LogisticRegression(C=1.0, max_iter=2000).fit(np.vstack([lab, fl]),
                                                       np.r_[np.zeros(len(lab)), np.ones(len(fl))])
    odds = clf.predict_proba(lab)[:, 1]
    return scores, (1 - y).astype(float), [knn, odds / (1 - odds)]


def variants_cli(doc: str, analyse: Callable[[Path], None]) -> None:
    """The command line of the regret analyses: each variant's work dir of `backtest_variants.py`, analysed."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/pond-backtest-variants"))
    ap.add_argument("--variants", nargs="+", default=["pond", "walks"])
    a = ap.parse_args()
    for v in a.variants:
        analyse(a.workdir / v)


if __name__ == "__main__":
    variants_cli(__doc__, anatomy)
