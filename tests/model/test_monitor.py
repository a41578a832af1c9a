"""The QoS monitor's model: trained on the lab's spill runs, judged on workloads it never saw, served by threshold."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pond.core.errors import ContractError
from pond.core.params import MONITOR_EVENTS, MonitorParams
from pond.features.tma import TMA_COLUMNS, rate_name
from pond.models import monitor_train
from pond.models.li import li_feature_names, make_li_model
from pond.models.monitor import fit_stall_rule, flag_threshold, spill_runs
from pond.models.monitor_features import (
    ALLOCATION,
    POOL_STALLS,
    either,
    monitor_events,
    monitor_feature_names,
    monitor_features,
    pool_stalls,
)
from pond.models.monitor_train import heldout
from pond.telemetry.events import lab_events
from pond.telemetry.fleet import LabParams, build_lab
from pond.telemetry.fleet.lab import event_rates
from pond.telemetry.fleet.pool_counters import pool_rates
from tests.unit.test_pool_counters import _workload


def test_the_threshold_flags_at_most_the_false_alarms_allowed():
    scores = np.array([0.1, 0.2, 0.3, 0.4, 0.9, 0.8, 0.35])
    exceeds = np.array([0, 0, 0, 0, 1, 1, 1])
    t = flag_threshold(scores, exceeds, 0.25)                  # 1 of the 4 runs within the PDM may be flagged
    assert (scores[exceeds == 0] >= t).sum() == 1 and t == np.nextafter(0.3, np.inf)
    assert (scores[exceeds == 1] >= t).tolist() == [True, True, True]
    assert (scores[exceeds == 0] >= flag_threshold(scores, exceeds, 0.0)).sum() == 0
    assert flag_threshold(scores[4:], exceeds[4:], 0.05) == np.inf   # nothing within the PDM to judge by


def test_spill_runs_pair_counters_with_their_own_run_and_say_when_none_pairs():
    counters = pd.DataFrame({"workload_id": ["a", "a", "b"], "latency_ratio": [2.22] * 3,
                             "spilled_pct": [50.0, 50.0, 100.0], "repetition": [0, 1, 0], "X": [1, 2, 3]})
    slow = pd.DataFrame({"workload_id": ["a", "a", "b"], "latency_ratio": [2.22] * 3,
                         "spilled_pct": [50.0, 50.0, 100.0], "repetition": [0, 1, 0], "slowdown_pct": [4.0, 6.0, 1.0]})
    assert spill_runs(counters, slow, 5).exceeds.tolist() == [0, 1, 0]
    # counted on other repetitions than timed: the mean slowdown of the run's allocation
    other = spill_runs(counters.assign(repetition=7), slow, 4.5)
    assert other.slowdown_pct.tolist() == [5.0, 5.0, 1.0] and other.exceeds.tolist() == [1, 1, 0]
    with pytest.raises(ContractError, match="spill_counters"):
        spill_runs(counters.assign(workload_id="z"), slow, 5)


@pytest.fixture(scope="module")
def lab_runs():
    lab = build_lab(LabParams(seed=5, repetitions=1))
    runs = spill_runs(lab.spill_counters, lab.slowdowns, 5.0)
    features = monitor_features(runs, list(lab_events()), runs.spilled_pct / 100, runs.latency_ratio)
    return lab, runs, features, monitor_feature_names(list(lab_events()))


def test_the_inputs_are_the_rates_and_tma_metrics_of_the_events_read_then_the_allocation(lab_runs):
    lab, _runs, features, names = lab_runs
    assert names == li_feature_names(features) + list(ALLOCATION)       # every event: the LI model's features
    read, missing = monitor_events(MONITOR_EVENTS, list(lab_events()))
    assert missing == [] and len(read) == 12 and "CPU_CLK_UNHALTED.THREAD" in read
    twelve = monitor_feature_names(read)
    rates = [rate_name(e) for e in read if e != "CPU_CLK_UNHALTED.THREAD"]
    assert twelve == [*rates, "tma_dram_bound", "l3_miss_latency", "mlp", *ALLOCATION]
    assert set(twelve) < set(names)
    # a lab that lacks some wanted events trains on those it has; the cycle count is read whatever is asked
    read, missing = monitor_events(["INST_RETIRED.ANY", "NOT_COUNTED"], ["CPU_CLK_UNHALTED.THREAD", "INST_RETIRED.ANY",
                                                                       "X"])
    assert read == ["CPU_CLK_UNHALTED.THREAD", "INST_RETIRED.ANY"] and missing == ["NOT_COUNTED"]
    assert monitor_feature_names(read) == ["rate:INST_RETIRED.ANY", *ALLOCATION]
    # the features of counts that carry only the events read: the same values as from every event
    read = monitor_events(MONITOR_EVENTS, list(lab_events()))[0]
    counts = lab.spill_counters.head(50)
    few = monitor_features(counts[read], read, np.ones(50), np.full(50, 2.22))
    full = monitor_features(counts, list(lab_events()), np.ones(50), np.full(50, 2.22))
    pd.testing.assert_frame_equal(few[monitor_feature_names(read)], full[monitor_feature_names(read)])
    assert few[[c for c in TMA_COLUMNS if c not in twelve]].isna().all().all()


@pytest.mark.parametrize("events", ["every lab event", "train_monitor.events"])
def test_a_run_whose_pool_raises_its_miss_latency_is_flagged_and_one_that_runs_the_same_is_not(lab_runs, events):
    _lab, runs, features, names = lab_runs
    if events == "train_monitor.events":
        names = monitor_feature_names(monitor_events(MONITOR_EVENTS, list(lab_events()))[0])
    model = make_li_model(0).fit(features[names].to_numpy(np.float32), runs.exceeds.to_numpy())
    hand = pd.concat([_workload(d=0.28, h=0.2, c=1.3, u=0.5, cold=0.0), _workload(d=0.0, h=0.0, w=0.0, u=0.0)],
                     ignore_index=True)
    local = event_rates(hand, np.random.default_rng(1))
    counts = pool_rates(hand, local, 2.22, 100.0) * 1e11
    x = monitor_features(counts, list(lab_events()), [1.0, 1.0], [2.22, 2.22])
    p = model.predict_proba(x[names].to_numpy(np.float32))[:, 1]
    judged = (runs.latency_ratio == 2.22) & (runs.spilled_pct > 0)
    seen = model.predict_proba(features.loc[judged, names].to_numpy(np.float32))[:, 1]
    t = flag_threshold(seen, runs.exceeds[judged].to_numpy(), 0.05)
    assert x.l3_miss_latency[0] > 2 * x.l3_miss_latency.fillna(0)[1]
    assert p[0] >= t > p[1]


def test_a_vm_slowed_by_page_walks_on_the_pool_is_flagged_by_the_stall_rule_where_the_forest_may_not_see_it(lab_runs):
    # the fleet's misses past the border were VMs slowed by page walks the pool serves, which few lab workloads show
    _lab, runs, features, _names = lab_runs
    rule = fit_stall_rule(features[POOL_STALLS].to_numpy(float), runs.exceeds.to_numpy())
    assert rule is not None and rule.coef > 0                      # more stalls the pool explains: more likely slowed
    walks = _workload(d=0.01, h=0.0, w=0.15, q=0.6, u=0.05)          # walks: 0.15 x 0.6 x 0.82 = 7.4% more cycles
    same = _workload(d=0.0, h=0.0, w=0.0, u=0.0)
    hand = pd.concat([walks, same], ignore_index=True)
    counts = pool_rates(hand, event_rates(hand, np.random.default_rng(1)), 1.82, 100.0) * 1e11
    stalls = pool_stalls(counts, np.array([1.82, 1.82]))
    assert stalls[0] > 0.05 and stalls[1] < 0.01
    p = rule.p(stalls)
    assert p[0] > 0.9 and p[1] < 0.1
    forest = np.array([0.2, 0.3])
    assert either(forest, rule, stalls).tolist() == [p[0], 0.3]      # the larger P of the two
    assert either(forest, rule, np.array([np.nan, np.nan])).tolist() == [0.2, 0.3]   # no stalls counted: the forest
    assert either(forest, None, stalls) is forest
    assert fit_stall_rule(np.array([0.1, 0.2]), np.array([0, 0])) is None     # one class: no rule


def test_a_monitor_that_does_not_read_the_stall_events_fits_no_stall_rule(lab_runs):
    lab, runs, features, names = lab_runs
    p = MonitorParams(folds=2, inner_folds=2)
    local = features.set_index(runs.workload_id)[names].groupby(level=0).first()
    study = monitor_train.lab_for(runs, features, names, names[:-2], local, lab.slowdowns, p)
    assert np.isfinite(study.stalls).all()
    few = monitor_feature_names(["CPU_CLK_UNHALTED.THREAD", "CYCLE_ACTIVITY.STALLS_L3_MISS"])
    blind = monitor_train.lab_for(runs, features, few, names[:-2], local, lab.slowdowns, p)
    assert np.isnan(blind.stalls).all() and fit_stall_rule(blind.stalls, blind.exceeds) is None


def test_every_run_is_judged_by_models_that_never_saw_its_workload(lab_runs, monkeypatch):
    lab, runs, features, names = lab_runs
    p = MonitorParams(folds=3, inner_folds=2, call_level=0.5)
    study = monitor_train.lab_for(runs, features, names, names[:-2],
                                  features.set_index(runs.workload_id)[names].groupby(level=0).first(),
                                  lab.slowdowns, p)
    seen: list[tuple[set, set]] = []
    real = monitor_train._fitters

    def spy(lab_, seed, stall_rule):
        def wrap(fit):
            def fitted(train):
                score = fit(train)
                def scored(idx):
                    seen.append((set(train), set(lab_.workload[idx])))
                    return score(idx)
                return scored
            return fitted
        return {m: wrap(f) for m, f in real(lab_, seed, stall_rule).items()}

    real_calls = monitor_train.li_calls
    called: list[tuple[set, set]] = []

    def spy_calls(lab_, train, rows, seed):
        called.append((set(train), set(lab_.workload[rows])))
        return real_calls(lab_, train, rows, seed)

    monkeypatch.setattr(monitor_train, "_fitters", spy)
    monkeypatch.setattr(monitor_train, "li_calls", spy_calls)
    h = heldout(study, p, 0)
    assert seen and all(not (train & scored) for train, scored in seen)
    # which workloads the LI model calls, for the whole-pool threshold and its judgement: never by a model that saw it
    assert called and all(not (train & scored) for train, scored in called)
    judged = study.spilled > 0
    assert np.isfinite(h.scores["monitor"][judged]).all()
    assert np.isfinite(h.called[np.isin(study.ratio, list(study.li))]).all()


def test_the_stage_trains_on_spill_runs_and_says_why_it_trains_nothing_without_them(small_raw, tmp_path, monkeypatch):
    import json
    import shutil

    from tests.conftest import params_file, run_pond, small_params

    monkeypatch.chdir(tmp_path)                           # its MLflow runs go to tmp_path/data/mlflow
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    params = small_params()
    params["train_monitor"].update(folds=2, inner_folds=2, call_level=0.5)
    cfg = params_file(tmp_path / "params.yaml", params)
    args = ["--out", str(tmp_path / "monitor"), "--metrics", str(tmp_path / "m.json"), "--plots", str(tmp_path / "p")]
    assert run_pond(["--params", str(cfg), "train_monitor", "--raw", str(small_raw), *args]) == 0
    manifest = json.loads((tmp_path / "monitor/manifest.json").read_text())["monitor"]
    assert manifest["onnx_parity_max_abs_diff"] <= 1e-5 and set(manifest["thresholds"]) == {"1.82", "2.22"}
    assert manifest["features"][-2:] == ["alloc:pool_share", "alloc:latency_ratio"]
    assert manifest["events"] == [e for e in lab_events() if e in MONITOR_EVENTS] and len(manifest["events"]) == 12
    assert manifest["features"] == monitor_feature_names(manifest["events"])
    assert manifest["stall_rule"]["feature"] == POOL_STALLS and manifest["stall_rule"]["coef"] > 0
    workloads = set(pd.read_parquet(small_raw / "workloads.parquet").workload_id.astype(str))
    for ratio, shares in manifest["full_pool_workloads"].items():    # each workload's held-out flags, all on pool
        assert ratio in manifest["thresholds"] and shares and set(shares) <= workloads
        assert all(0.0 <= f <= 1.0 for f in shares.values())
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert metrics["trained"] and 0 <= metrics["2.22"]["monitor"]["false_alarm"] <= 1
    # with a call level, a second threshold per ratio, judged on the held-out workloads' calls all on the pool
    assert set(manifest["whole_pool_thresholds"]) == set(manifest["thresholds"]) and manifest["call_level"] == 0.5
    calls = metrics["2.22"]["calls"]
    assert calls["runs_exceeding"] + calls["runs_within"] > 0 and set(calls) >= {"spill_threshold",
                                                                                "whole_pool_threshold"}
    bare = tmp_path / "bare"
    shutil.copytree(small_raw, bare, ignore=shutil.ignore_patterns("spill_counters*"))
    assert run_pond(["--params", str(cfg), "train_monitor", "--raw", str(bare), *args]) == 0
    assert json.loads((tmp_path / "m.json").read_text()) == {
        "trained": False, "reason": "the data set has no spill_counters table"}
    assert json.loads((tmp_path / "monitor/manifest.json").read_text())["monitor"] is None


def _hand_lab(workload, spilled, exceeds):
    n = len(workload)
    return monitor_train.Lab(X=np.zeros((n, 1), np.float32), exceeds=np.asarray(exceeds, np.int8),
                             slowdown=np.zeros(n), workload=np.asarray(workload), ratio=np.full(n, 1.82),
                             spilled=np.asarray(spilled, float), li_X=np.zeros((n, 1), np.float32),
                             latency=np.zeros(n), stalls=np.zeros(n), local=pd.DataFrame(), li={})


def test_the_whole_pool_threshold_is_set_on_the_called_workloads_runs_all_on_the_pool():
    # a: called, within the PDM, scores low; b: never called, within the PDM, scores high; c: called, past the PDM
    lab = _hand_lab(["a"] * 20 + ["b"] * 20 + ["c"] * 4 + ["a"] * 4, [100.0] * 44 + [25.0] * 4,
                    [0] * 40 + [1] * 4 + [0] * 4)
    scores = np.r_[np.linspace(0.01, 0.1, 20), np.linspace(0.6, 0.9, 20), [0.3] * 4, [0.95] * 4]
    called = np.r_[[0.9] * 20, [0.1] * 20, [0.8] * 4, [0.9] * 4]
    p = MonitorParams(max_false_alarm=0.05, fa_confidence=None)
    runs = monitor_train.whole_pool_runs(lab, np.arange(48), 1.82, called, 0.5)
    assert set(lab.workload[runs]) == {"a", "c"} and (lab.spilled[runs] >= 100).all()
    t = monitor_train.call_threshold(scores, lab, runs, p, spill=0.99)
    assert (scores[40:44] >= t).all() and (scores[:20] >= t).sum() == 1    # c caught; 1 of a's 20 allowed
    every = np.r_[runs, np.arange(20, 40)]                 # with b's runs, the rule would have to pass over them
    assert flag_threshold(scores[every], lab.exceeds[every], 0.05) > 0.3
    alone = runs[lab.workload[runs] == "c"]                # no called run within the PDM: the spill threshold
    assert monitor_train.call_threshold(scores, lab, alone, p, spill=0.99) == 0.99


def test_a_vm_all_on_the_pool_is_flagged_at_the_whole_pool_threshold_where_the_model_has_one():
    from pond.models.monitor_runtime import MonitorModel

    m = MonitorModel(session=None, features=[], classes=[0, 1], thresholds={1.82: 0.45, 2.22: 0.3}, pdm=5.0,
                     sha256="", whole_pool={1.82: 0.25, 2.22: 0.5})
    assert m.threshold(1.9) == 0.45 and m.threshold(1.9, whole=True) == 0.25     # the nearest judged ratio
    assert m.threshold(2.5, whole=True) == 0.5
    older = MonitorModel(session=None, features=[], classes=[0, 1], thresholds={1.82: 0.45}, pdm=5.0, sha256="")
    assert older.threshold(1.82, whole=True) == 0.45                            # a model trained before: the one


def test_without_a_call_level_the_whole_pool_flags_are_the_spill_flags(lab_runs):
    lab, runs, features, names = lab_runs
    study = monitor_train.lab_for(runs, features, names, names[:-2],
                                  features.set_index(runs.workload_id)[names].groupby(level=0).first(),
                                  lab.slowdowns, MonitorParams())
    h = heldout(study, MonitorParams(folds=3, inner_folds=2, call_level=None), 0)
    np.testing.assert_array_equal(h.calls, h.flags["monitor"])
    assert np.isnan(h.called).all()
