"""Held-out trade-off curves of latency-insensitivity predictors (Pond Fig. 17).

LI = share of all workloads predicted insensitive; FP = share of all workloads predicted
insensitive that are in fact sensitive. A predictor is a score (higher = more likely
insensitive) swept over every cut-off; baselines use one counter, low = insensitive.
Curves come from repeated random 50/50 splits: fit on one half, score the other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats
from sklearn.model_selection import train_test_split

from pond.core.progress import progress
from pond.models.runtime import insensitive_proba


def cutoff_curve(score: np.ndarray, insensitive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(LI, FP) at every distinct cut-off, from predicting nothing to predicting everything.

    Workloads with equal scores are taken together, as a threshold on the score would.
    """
    n = len(score)
    order = np.argsort(-score, kind="stable")
    s = score[order]
    false_pos = np.cumsum(1 - insensitive[order])
    last = np.r_[s[1:] != s[:-1], True]
    k = np.arange(1, n + 1)
    return np.r_[0.0, k[last] / n], np.r_[0.0, false_pos[last] / n]


def li_at_fp(li: np.ndarray, fp: np.ndarray, fp_targets: np.ndarray) -> np.ndarray:
    """Largest LI whose FP does not exceed each target (the curve is a monotone step function)."""
    idx = np.searchsorted(fp, np.asarray(fp_targets) + 1e-12, side="right") - 1
    return li[np.maximum(idx, 0)]


def threshold_table(p: np.ndarray, insensitive: np.ndarray, thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(LI, FP) when workloads with p >= threshold are called insensitive, for each threshold."""
    called = p[None, :] >= thresholds[:, None]
    return called.mean(axis=1), (called & (insensitive[None, :] == 0)).mean(axis=1)


def mean_band(values: np.ndarray, level: float = 0.99) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean over splits (axis 0) and its two-sided ``level`` confidence interval (Student t)."""
    mean = values.mean(axis=0)
    n = values.shape[0]
    if n < 2:
        return mean, mean, mean
    half = stats.t.ppf(0.5 + level / 2, n - 1) * values.std(axis=0, ddof=1) / np.sqrt(n)
    return mean, mean - half, mean + half


@dataclass
class SplitStudy:
    fp_grid: np.ndarray
    thresholds: np.ndarray
    li_at_fp: dict[str, np.ndarray]   # method -> (n_splits, len(fp_grid))
    li_by_threshold: np.ndarray       # forest, (n_splits, len(thresholds))
    fp_by_threshold: np.ndarray


def split_study(X: np.ndarray, y: np.ndarray, baselines: dict[str, np.ndarray],
                make_model: Callable[[int], object], n_splits: int, seed: int,
                fp_grid: np.ndarray, thresholds: np.ndarray, method: str = "random_forest",
                desc: str = "train_li") -> SplitStudy:
    """Fit on a random half, score the other half, ``n_splits`` times; baselines on the same halves."""
    rng = np.random.default_rng(seed)
    idx = np.arange(len(y))
    curves = {m: np.empty((n_splits, len(fp_grid))) for m in [method, *baselines]}
    li_t = np.empty((n_splits, len(thresholds)))
    fp_t = np.empty((n_splits, len(thresholds)))
    stratify = y if np.bincount(y, minlength=2).min() >= 2 else None
    for i in progress(range(n_splits), desc=desc, unit="splits"):  # 100 fits on ~80 rows: a loop over splits
        split_seed = int(rng.integers(2**31 - 1))
        train, test = train_test_split(idx, test_size=0.5, random_state=split_seed, stratify=stratify)
        model = make_model(split_seed).fit(X[train], y[train])
        p = insensitive_proba(model.predict_proba(X[test]), model.classes_)
        curves[method][i] = li_at_fp(*cutoff_curve(p, y[test]), fp_grid)
        li_t[i], fp_t[i] = threshold_table(p, y[test], thresholds)
        for name, counter in baselines.items():
            curves[name][i] = li_at_fp(*cutoff_curve(-counter[test], y[test]), fp_grid)
    return SplitStudy(fp_grid, thresholds, curves, li_t, fp_t)
