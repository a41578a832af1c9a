"""Pond's sensitivity rule has one definition (``models.li``): the LI labels, the replay's outcomes, SLA-alpha, the
fleet's evidence and the lab's calibration all ask it."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from pond.models.li import at_full_pool, exceeds_pdm, li_labels, within_pdm
from tests.conftest import ROOT


def test_the_rule_by_example():
    s = np.array([4.9, 5.0, 5.1, np.nan])
    assert exceeds_pdm(s, 5.0).tolist() == [False, False, True, False]
    assert within_pdm(s, 5.0).tolist() == [True, True, False, False]      # NaN is neither
    assert at_full_pool(pd.Series([99.0, 100.0, 100])).tolist() == [False, True, True]


def test_labels_are_the_rule_on_full_pool_runs():
    runs = pd.DataFrame({"workload_id": ["a", "a", "b", "b", "c"], "latency_ratio": 1.82,
                         "spilled_pct": [100.0, 100.0, 100.0, 50.0, 100.0], "slowdown_pct": [4.0, 6.0, 5.5, 1.0, 5.0]})
    assert li_labels(runs, 1.82, 5.0).to_dict() == {"a": 1, "b": 0, "c": 1}   # a: mean 5.0; b: its 50% run ignored


def test_no_other_module_writes_the_rule():
    rule = re.compile(r"[<>]=? *(p\.|params\.|self\.)?pdm\b|spilled_pct\"?\]? *== *100")
    offenders = [f"{p.relative_to(ROOT)}:{i}" for d in ("features", "models", "optimize", "simulator", "evaluation", "pipelines",
                                                         "serving") for p in sorted((ROOT / d).rglob("*.py"))
                 if p.name != "li.py" for i, line in enumerate(p.read_text().splitlines(), 1) if rule.search(line)]
    assert not offenders, offenders
