"""Outcomes without lab identity (lab-estimated FP, labelled) and with censored VMs (confirmed and
worst case), on hand-made VMs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pond.evaluation.combined import outcomes, summarize
from pond.models.decision import PolicyKnobs, decide

TABLE = pd.DataFrame({0.0: [0.0, 0.0], 100.0: [2.0, 30.0]}, index=pd.Index(["calm", "hot"], name="workload_id"))


def _vms(**cols) -> pd.DataFrame:
    base = {"vm_id": ["a", "b", "c", "d"], "memory_gb": [10.0] * 4}
    return pd.DataFrame({**base, **cols})


def test_censored_vm_counted_confirmed_and_worst_case():
    # all get a 5-GB zNUMA. a: ended, touched 8 GB -> OP. b: ended, touched 2 GB. c: running, touched 7 GB so
    # far -> confirmed OP. d: running, touched 1 GB so far -> unresolved, counted only in the worst case.
    vms = _vms(untouched_fraction=[0.2, 0.8, np.nan, np.nan], untouched_so_far=[np.nan, np.nan, 0.3, 0.9],
               workload_id=["calm"] * 4)
    d = decide(vms.memory_gb, np.zeros(4, bool), np.full(4, np.nan), np.full(4, 0.5), PolicyKnobs(None, 0.0))
    out = outcomes(vms, d, TABLE, pdm=5)
    assert out.overpredicted.tolist() == [True, False, True, False]
    assert out.op_unresolved.tolist() == [False, False, False, True]
    s = summarize(out)
    assert s["censored"] == 2 and s["censored_unresolved"] == 1
    assert s["mispredictions_conservative"] == pytest.approx(0.5)
    assert s["mispredictions_worst_case"] == pytest.approx(0.75)


def test_running_vm_without_so_far_is_unresolved_not_dropped():
    vms = _vms(untouched_fraction=[0.9, 0.9, 0.9, np.nan])     # no untouched_so_far column at all
    d = decide(vms.memory_gb, np.zeros(4, bool), np.full(4, np.nan), np.full(4, 0.5), PolicyKnobs(None, 0.0))
    s = summarize(outcomes(vms, d, TABLE, pdm=5))
    assert s["vms"] == 4 and s["censored"] == 1 and s["censored_unresolved"] == 1
    assert s["mispredictions_conservative"] == 0.0 and s["mispredictions_worst_case"] == pytest.approx(0.25)


def test_no_workload_id_column_uses_the_lab_estimate_and_says_so():
    vms = _vms(untouched_fraction=[0.5] * 4)                    # a provider's export: no workload_id
    d = decide(vms.memory_gb, np.array([True, True, False, False]), np.array([0.9, 0.9, np.nan, np.nan]),
               np.zeros(4), PolicyKnobs(0.8, None))
    out = outcomes(vms, d, TABLE, pdm=5)
    assert not out.lab_truth.any() and not out.false_positive.any()
    s = summarize(out, fp_estimate_rate=0.1)
    assert s["fp_source"] == "lab_estimate" and s["pool_only_without_truth"] == 2
    assert s["false_positives"] == pytest.approx(2 * 0.1 / 4) and s["pool_share"] == pytest.approx(0.5)


def test_truth_where_known_estimate_elsewhere():
    vms = _vms(untouched_fraction=[0.5] * 4, workload_id=["hot", "calm", "never-measured", None])
    d = decide(vms.memory_gb, np.ones(4, bool), np.full(4, 0.9), np.zeros(4), PolicyKnobs(0.8, None))
    s = summarize(outcomes(vms, d, TABLE, pdm=5), fp_estimate_rate=0.2)
    assert s["fp_source"] == "truth+lab_estimate" and s["lab_truth_share"] == 0.5
    assert s["false_positives"] == pytest.approx(1 / 4 + 2 * 0.2 / 4)


def test_a_vms_own_measured_slowdown_is_its_truth_where_the_lab_has_none():
    # a: lab truth "hot" (its own report says calm: the workload's truth stands); b: no workload, measured 9% ->
    # a realized false positive; c: no workload, measured 1%; d: neither -> the estimate
    vms = _vms(untouched_fraction=[0.5] * 4, workload_id=["hot", None, None, None])
    d = decide(vms.memory_gb, np.ones(4, bool), np.full(4, 0.9), np.zeros(4), PolicyKnobs(0.8, None))
    measured = pd.Series({"a": 1.0, "b": 9.0, "c": 1.0, "elsewhere": 50.0})
    out = outcomes(vms, d, TABLE, pdm=5, measured=measured)
    assert out.false_positive.tolist() == [True, True, False, False]
    assert out.lab_truth.tolist() == [True, True, True, False]
    s = summarize(out, fp_estimate_rate=0.2)
    assert s["fp_source"] == "truth+lab_estimate" and s["false_positives"] == pytest.approx(2 / 4 + 0.2 / 4)
