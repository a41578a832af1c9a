"""The shared per-VM decision and the ground-truth judgement, on hand-made VMs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pond.evaluation.combined import outcomes, slowdown_at, slowed_by_spill, summarize
from pond.models.decision import (
    Decision,
    PolicyKnobs,
    compiled_rules,
    decide,
    decide_one,
    policy_knobs,
    pool_gb,
    served_name,
)
from pond.models.policy import Alternative, LiPolicy, Policy, Serve, UmPolicy


def test_decision_paths_and_gb_rounding():
    mem = np.array([16.0, 16.0, 16.0, 4.0, 8.0])
    has_history = np.array([True, False, True, True, True])
    p = np.array([0.9, 0.99, 0.5, np.nan, 0.1])
    raw = np.array([0.5, 0.5, 0.33, 0.2, 0.05])
    d = decide(mem, has_history, p, raw, PolicyKnobs(li_threshold=0.8, um_offset=0.0))
    assert d["decision"].tolist() == ["pool_only", "znuma", "znuma", "local_only", "local_only"]
    assert d["pool_gb"].tolist() == [16.0, 8.0, 5.0, 0.0, 0.0]     # 0.33 * 16 = 5.28 -> 5 GB
    assert d["local_gb"].tolist() == [0.0, 8.0, 11.0, 4.0, 8.0]    # 0.2 * 4 = 0.8 -> 0 GB: local only
    assert d["znuma_gb"].tolist() == [0.0, 8.0, 5.0, 0.0, 0.0]     # no history: P(insensitive) is ignored
    shifted = decide(mem, has_history, p, raw, PolicyKnobs(li_threshold=None, um_offset=0.25))
    assert shifted["decision"].tolist() == ["znuma", "znuma", "znuma", "local_only", "local_only"]  # 0.08 * 16 -> 1 GB
    assert (shifted["pool_gb"] == np.floor(np.clip(raw - 0.25, 0, 1) * mem)).all()
    none = decide(mem, has_history, p, raw, PolicyKnobs(None, None))
    assert (none["decision"] == "local_only").all() and (none["local_gb"] == mem).all()


def test_read_only_inputs_take_the_rule_already_compiled():
    """An Arrow batch's columns are read-only arrays. numba compiles a second rule for those, which cost the first
    Arrow batch after each start 0.3 s (p99 0.25 s over 8 s of load); the rule takes them as writable copies."""
    mem, hist, p, raw = np.array([16.0, 8.0]), np.array([True, False]), np.array([0.9, np.nan]), np.array([0.5, 0.2])
    knobs = PolicyKnobs(0.8, 0.0)
    writable = decide(mem, hist, p, raw, knobs)
    compiled = list(compiled_rules()[1].signatures)
    frozen = [a.copy() for a in (mem, hist, p, raw)]
    for a in frozen:
        a.setflags(write=False)
    read_only = decide(*frozen, knobs)
    assert list(compiled_rules()[1].signatures) == compiled
    assert writable.keys() == read_only.keys()
    for k in writable:
        np.testing.assert_array_equal(read_only[k], writable[k])
    assert not frozen[0].flags.writeable                   # the caller's arrays are left as they were


def test_a_pool_cap_trims_every_vm_and_gives_insensitive_ones_exactly_the_cap():
    mem = np.array([16.0, 16.0, 16.0, 40.0, 8.0])
    has_history = np.array([True, True, True, False, True])
    p = np.array([0.9, 0.5, 0.5, 0.99, 0.95])
    raw = np.array([0.0, 0.5, 0.1, 0.5, 0.0])
    uncapped = decide(mem, has_history, p, raw, PolicyKnobs(0.8, 0.0))
    d = decide(mem, has_history, p, raw, PolicyKnobs(0.8, 0.0, pool_cap=0.2))
    # insensitive: floor(0.2 x 16) = 3 GB (not 16); UM 0.5 -> 3 GB (not 8); UM 0.1 -> 1 GB (under the cap);
    # no history: UM 0.5 of 40 -> 8 GB; insensitive 8 GB VM: floor(1.6) = 1 GB
    assert d["pool_gb"].tolist() == [3.0, 3.0, 1.0, 8.0, 1.0]
    assert d["decision"].tolist() == ["znuma"] * 5
    assert d["li_called"].tolist() == [True, False, False, False, True]
    assert (d["pool_gb"] <= uncapped["pool_gb"]).all()
    assert uncapped["li_called"].tolist() == [True, False, False, False, True]
    assert decide(mem, has_history, p, raw, PolicyKnobs(0.8, 0.0, pool_cap=1.0))["pool_gb"].tolist() \
        == uncapped["pool_gb"].tolist()


def test_a_capped_insensitive_call_is_judged_as_pool_only():
    table = pd.DataFrame([[0.0, 0.0, 20.0], [0.0, 1.0, 3.0]], index=["hot", "cool"], columns=[0.0, 50.0, 100.0])
    vms = pd.DataFrame({"vm_id": ["a", "b"], "memory_gb": [10.0, 10.0], "untouched_fraction": [0.0, 0.0],
                        "workload_id": ["hot", "cool"]})
    d = decide(vms.memory_gb.to_numpy(), np.array([True, True]), np.array([0.9, 0.9]), np.zeros(2),
               PolicyKnobs(0.8, 0.0, pool_cap=0.3))
    out = outcomes(vms, d, table, pdm=5.0)
    # both touch all 10 GB with 7 local, yet only the hot one (20% entirely on pool) is mispredicted: a FP
    assert out.false_positive.tolist() == [True, False] and not out.overpredicted.any()
    s = summarize(out)
    assert s["li_share"] == pytest.approx(0.3) and s["um_share"] == 0.0 and s["mispredictions_conservative"] == 0.5


def test_an_insensitive_call_the_cap_left_all_local_is_not_judged():
    """A 4 GB VM called insensitive under a 15% cap gets floor(0.6) = 0 GB on the pool: it runs all
    local, so even its sensitive workload (hot: 20% on pool) is no false positive."""
    table = pd.DataFrame([[0.0, 0.0, 20.0]], index=["hot"], columns=[0.0, 50.0, 100.0])
    vms = pd.DataFrame({"vm_id": ["a"], "memory_gb": [4.0], "untouched_fraction": [0.0], "workload_id": ["hot"]})
    d = decide(vms.memory_gb.to_numpy(), np.array([True]), np.array([0.9]), np.zeros(1), PolicyKnobs(0.8, 0.0, 0.15))
    assert d["decision"].tolist() == ["local_only"] and d["li_called"].tolist() == [True]
    out = outcomes(vms, d, table, pdm=5.0)
    assert not out.false_positive.any()
    assert summarize(out, fp_estimate_rate=0.5)["pool_only_without_truth"] == 0


def test_ground_truth_counts():
    table = pd.DataFrame([[0.0, 0.0, 20.0], [0.0, 1.0, 3.0]], index=["hot", "cool"], columns=[0.0, 50.0, 100.0])
    assert slowdown_at(table, pd.Series(["hot", "cool", "x"]), np.array([75.0, 100.0, 10.0]))[:2].tolist() == [10.0, 3.0]
    vms = pd.DataFrame({"vm_id": ["a", "b", "c", "d"], "memory_gb": [10.0, 10.0, 10.0, 10.0],
                        "untouched_fraction": [0.5, 0.2, 0.5, 0.9], "workload_id": ["hot", "hot", "cool", "cool"]})
    d = decide(vms.memory_gb.to_numpy(), np.array([True, False, True, False]), np.array([0.9, 0, 0.9, 0]),
               np.array([0.0, 0.5, 0.0, 0.5]), PolicyKnobs(0.8, 0.0))
    out = outcomes(vms, d, table, pdm=5.0)
    # a: hot on pool entirely (20% > 5%): FP; b: touches 8 GB with 5 local -> 3/8 = 37.5% spilled of hot:
    # 0% at <= 50% spill -> overpredicted but not severe; c: cool on pool (3%): fine; d: 1 GB touched, fine.
    assert out.false_positive.tolist() == [True, False, False, False]
    assert out.overpredicted.tolist() == [False, True, False, False]
    assert out.severe.tolist() == [True, False, False, False]
    s = summarize(out)
    assert s["pool_share"] == pytest.approx((10 + 5 + 10 + 5) / 40)
    assert s["mispredictions_conservative"] == 0.5 and s["mispredictions_severe"] == 0.25


def test_a_spill_slows_past_the_pdm_per_allocation():
    """The count Pond's evaluation keeps of a touch (§6.4.3): whether the share of the touched memory past the local
    node slows the workload past the PDM, for one allocation per row."""
    table = pd.DataFrame([[0.0, 0.0, 20.0], [0.0, 1.0, 3.0]], index=["hot", "cool"], columns=[0.0, 50.0, 100.0])
    workload = pd.Series(["hot", "hot", "cool", "x", "hot"])
    touched = np.array([8.0, 8.0, 8.0, 8.0, 0.0])
    # local 2 GB: 75% spilled (hot: 10% > 5), local 6 GB: 25% (hot: 0%); cool never passes 5; x has no truth;
    # a VM that touched nothing spills nothing
    local = np.array([[2.0, 6.0, 0.0, 0.0, 0.0], [8.0, 0.0, 2.0, 0.0, 0.0]])
    got = slowed_by_spill(table, workload, touched, local, 5.0)
    assert got.tolist() == [[True, False, False, False, False], [False, True, False, False, False]]
    assert slowed_by_spill(table, workload, touched, local[0], 5.0).tolist() == got[0].tolist()


@pytest.mark.parametrize("knobs", [PolicyKnobs(0.8, 0.0), PolicyKnobs(0.8, 0.25), PolicyKnobs(None, 0.1),
                                   PolicyKnobs(0.5, None), PolicyKnobs(None, None), PolicyKnobs(0.8, 0.0, 0.15),
                                   PolicyKnobs(0.5, None, 0.3), PolicyKnobs(None, 0.1, 1.0)])
def test_one_vm_equals_the_vectorized_decision(knobs):
    """The scheduler's path (decide_one) and evaluate's (decide) run the same rule, field for field."""
    rng = np.random.default_rng(0)
    n = 2000
    mem = rng.choice([1.0, 2.0, 4.0, 7.5, 16.0, 28.0, 448.0], n)
    has_history = rng.random(n) < 0.7
    p = np.where(rng.random(n) < 0.1, np.nan, rng.choice([0.5, 0.8, 0.79999, 0.95, 0.2], n))
    raw = np.where(rng.random(n) < 0.02, np.nan, rng.uniform(-0.2, 1.4, n))
    raw[:3] = [0.25 + 1 / 16, 0.5, 1.25]           # exact GB boundaries
    whole = decide(mem, has_history, p, raw, knobs)
    for i in range(n):
        one = decide_one(float(mem[i]), bool(has_history[i]), float(p[i]), float(raw[i]), knobs.floats())
        assert list(one) == [whole[k][i] for k in Decision._fields], i
    assert np.isfinite(whole["pool_gb"]).all()       # a NaN prediction puts nothing on the pool
    assert (whole["local_gb"] + whole["pool_gb"] == mem).all() and (whole["local_gb"] >= 0).all()


def test_pool_gb_rounds_down_whole_gb_for_any_shape():
    got = pool_gb(np.array([[0.5, 0.2], [0.1, 1.5], [-0.3, 0.25]]), np.array([16.0, 4.0]))
    assert got.tolist() == [[8.0, 0.0], [1.0, 4.0], [0.0, 1.0]]   # 0.8 GB -> 0; 1.6 GB -> 1; clipped to [0, 1]


def _policy(serve: dict | None) -> Policy:
    """Only the fields the knobs read (``model_construct`` leaves the rest unset)."""
    alternatives = {"li_only": Alternative.model_construct(li_threshold=0.7),
                    "um_only": Alternative.model_construct(um_offset=0.05)}
    fields = {"li": LiPolicy.model_construct(threshold=0.6), "alternatives": alternatives,
              "um": UmPolicy.model_construct(enabled=True, offset=0.12)}
    return Policy.model_construct(**fields, **({} if serve is None else {"serve": Serve(**serve)}))


@pytest.mark.parametrize("serve, knobs, name", [
    (None, PolicyKnobs(0.6, 0.12), "combined"),
    ({"policy": "combined", "pool_cap": 0.3}, PolicyKnobs(0.6, 0.12, 0.3), "combined_cap30pct"),
    ({"policy": "li_only", "pool_cap": None}, PolicyKnobs(0.7, None), "li_only"),
    ({"policy": "um_only", "pool_cap": 0.2}, PolicyKnobs(None, 0.05, 0.2), "um_only_cap20pct"),
])
def test_the_served_knobs_are_the_chosen_policy_with_its_cap(serve, knobs, name):
    got = policy_knobs(_policy(serve))
    assert got["served"] == knobs and served_name(_policy(serve)) == name
    assert got["combined"] == PolicyKnobs(0.6, 0.12) and got["um_only"] == PolicyKnobs(None, 0.05)
