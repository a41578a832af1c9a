"""LI model selection: a rule that is truly better is picked; the rule deploys through ONNX exactly."""

from __future__ import annotations

import numpy as np

from pond.models.li_rule import CounterRule, export_rule
from pond.models.li_select import FOREST, candidates, nested, select
from pond.models.runtime import onnx_p_insensitive, session


def _rule_world(n=120, noise_features=40, seed=0):
    """Insensitive exactly when DRAM bound < 0.1; every other feature is noise, a few of them
    spuriously informative in a small sample."""
    rng = np.random.default_rng(seed)
    names = [f"rate:e{i}" for i in range(noise_features)] + ["tma_dram_bound", "tma_memory_bound"]
    X = rng.random((n, len(names))).astype(np.float32)
    X[:, -2] = rng.uniform(0, 0.3, n)
    y = (X[:, -2] < 0.1).astype(int)
    flip = rng.random(n) < 0.15              # memory bound agrees only loosely
    X[:, -1] = np.where(flip, rng.random(n), X[:, -2] * 2).astype(np.float32)
    return X, y, names


def test_rule_wins_where_it_is_truly_better():
    X, y, names = _rule_world()
    makers = candidates(names)
    assert list(makers) == ["dram_bound", "memory_bound", FOREST]
    won, li = select(X, y, np.arange(len(y)), makers, np.array([0.02]), 5, seed=0)
    assert won == "dram_bound"
    assert li["dram_bound"] >= np.mean(y) and li["dram_bound"] >= li[FOREST]   # every insensitive one, at FP <= 2%
    study = nested(X, y, np.arange(len(y)), makers, np.linspace(0.01, 0.05, 9), np.array([0.02]), n_outer=4, n_folds=4,
                   seed=0)
    assert study.winners == ["dram_bound"] * 4
    assert np.array_equal(study.curves["selected"], study.curves["dram_bound"])


def test_rule_onnx_matches_exactly_including_nan_and_ties():
    X, y, _ = _rule_world(seed=1)
    rule = CounterRule(X.shape[1] - 2, "dram_bound").fit(X, y)
    Y = np.vstack([X, X[:10] * 1.0001, np.full((3, X.shape[1]), np.nan, np.float32)]).astype(np.float32)
    got = onnx_p_insensitive(session(export_rule(rule, X.shape[1])), Y, [0, 1])
    assert np.array_equal(got, rule.predict_proba(Y)[:, 1])
    assert got[-1] == 1.0                              # a missing counter counts as 0
    low, high = rule.predict_proba(np.array([[0] * (X.shape[1] - 2) + [0.0, 0], [0] * (X.shape[1] - 2) + [0.29, 0]],
                                            np.float32))[:, 1]
    assert low > high                                  # lower DRAM bound: more likely insensitive
