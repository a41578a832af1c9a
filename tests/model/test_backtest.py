"""`pond backtest` end to end on the small fleet: every night's regret is measured on the candidates
the solver chose from, and the chosen pair replays exactly what `evaluate` realized."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.conftest import backtest_args, params_file, run_pond, small_params

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("variant", ["pond", "walks"])
def test_two_nights_with_regret(variant, request, tmp_path, monkeypatch):
    """Both built-in fleet variants: the walks fleet's mechanisms differ, the contract does not."""
    if variant == "pond":        # the shared fixture: simulate's tests replay its nights
        out = request.getfixturevalue("small_backtest")
        nights = pd.read_csv(out / "nights.csv")
    else:
        raw, bundle = request.getfixturevalue("small_walks_raw"), request.getfixturevalue("small_walks_bundle")
        monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
        out = tmp_path / "out"
        assert run_pond(["--params", str(params_file(tmp_path / "params.yaml", small_params(variant))), "backtest",
                         "2", *backtest_args(raw, bundle, tmp_path)]) == 0
        nights = pd.read_csv(out / "nights.csv")
    assert len(nights) == 2 and (out / "nights.csv").exists()
    for night in nights.as_of:       # what simulate decides the next day with: a policy per ratio, the scores
        assert {"policy_r1.82.json", "policy_r2.22.json", "scores.parquet"} <= {p.name for p in (out / night).iterdir()}
        # no Fig. 18 trade-off on a replayed night: nothing it decides reads it
        assert not {"tradeoff.csv", "um_tradeoff.png"} & {p.name for p in (out / night / "plots").iterdir()}
        um = json.loads((out / night / "train_um.json").read_text())
        assert um["backtest_nights"] > 0 and not any(k.startswith(("gbm.", "static.")) for k in um)
    assert nights.chosen_pool.to_numpy() == pytest.approx(nights.realized_pool.to_numpy(), abs=1e-9)
    assert nights.chosen_mispredictions.to_numpy() == pytest.approx(nights.realized_mispredictions.to_numpy(),
                                                                    abs=1e-9)
    assert (nights.hindsight_pool >= 0).all()
    assert (nights.regret == nights.hindsight_pool - nights.chosen_pool).all()
    within = nights.chosen_mispredictions <= nights.budget
    assert (nights.regret[within] >= -1e-12).all()   # a feasible choice can never beat the hindsight best
    # the best pair fixed over the nights keeps the budget every night, so no night's best in hindsight is below it
    assert (nights.fixed_pool <= nights.hindsight_pool + 1e-12).all()
    assert (nights.regret_fixed <= nights.regret + 1e-12).all()
    # the QoS monitor: it only takes mispredictions away, at most 1% of each day's VMs
    assert (nights.realized_unmitigated <= nights.realized_mispredictions + 1e-12).all()
    assert (nights.realized_mispredictions - nights.realized_unmitigated <= nights.mitigations + 1e-12).all()
    assert (nights.mitigations <= 0.01 + 1e-12).all() and (nights.false_alarms <= nights.mitigations).all()


def test_a_night_whose_next_day_has_no_vm_is_skipped_and_none_left_is_an_error(small_raw, small_bundle, tmp_path,
                                                                                capsys):
    """An imported trace with a gap: the night cannot be judged, so it is skipped and counted; when every
    night is skipped, backtest stops with a message naming the days, before training anything."""
    params = small_params()
    params["base"]["as_of"] = "2026-01-12"          # the small fleet's last day: nothing is created after it
    assert run_pond(["--params", str(params_file(tmp_path / "params.yaml", params)), "backtest", "1",
                     *backtest_args(small_raw, small_bundle, tmp_path)]) == 2
    assert "no VM was created on the day after any of the 1 nights ending 2026-01-12" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_trace_shorter_than_the_nights_asked_replays_the_nights_it_has(small_raw, small_bundle, tmp_path,
                                                                          monkeypatch, capsys):
    """A month of telemetry stopped the default nightly job at backtest, whose 14 nights need about 35 days. The
    small fleet starts 2026-01-01: of 8 nights ending 01-08, the first with a UM night to train on is 01-03 (its UM
    backtest's last night scores the as-of day itself), so backtest replays 6, says so, and simulate decides the
    window on them. A trace too short for one night still
    stops with train_um's own error."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    params = small_params()
    params["backtest"]["nights"] = 8
    p = ["--params", str(params_file(tmp_path / "params.yaml", params))]
    assert run_pond([*p, "backtest", *backtest_args(small_raw, small_bundle, tmp_path)]) == 0
    out = capsys.readouterr().out
    for day in ("2026-01-01", "2026-01-02"):
        assert f"backtest: night {day} skipped: too little telemetry before it to train on" in out
    assert "backtest: 6 nights of the 8 asked (2 at the start had too little telemetry before them to train on)" in out
    import json

    m = json.loads((tmp_path / "backtest.json").read_text())
    assert (m["nights"], m["nights_asked"], m["nights_skipped_short_history"]) == (6, 8, 2)
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = mlflow.get_experiment_by_name("pond-backtest").experiment_id
    runs = mlflow.search_runs([exp], filter_string="status = 'FINISHED'")
    assert len(runs) == 6 and runs["metrics.calibrated.mean_op"].notna().all()      # one UM run per night replayed
    assert len(mlflow.search_logged_models(experiment_ids=[exp])) == 0       # its models stay in the night's folder
    nights = pd.read_csv(tmp_path / "out" / "nights.csv")
    assert nights.as_of.tolist() == [f"2026-01-0{d}" for d in range(3, 9)]
    assert sorted(d.name for d in (tmp_path / "out").iterdir() if d.is_dir()) == nights.as_of.tolist()
    # the QoS monitor's recall on the fleet: the nights' slowed insensitive calls and the share it flagged
    evs = [json.loads((tmp_path / "out" / d / "evaluate.json").read_text())["combined"] for d in nights.as_of]
    slowed = sum(e["false_positives_with_truth"] for e in evs)
    flagged = sum(round((e["monitor_recall"] or 0.0) * e["false_positives_with_truth"]) for e in evs)
    assert (m["monitor_slowed_calls"], m["monitor_slowed_calls_flagged"]) == (slowed, flagged)
    assert nights.slowed_calls.sum() == slowed and (nights.slowed_calls_flagged <= nights.slowed_calls).all()
    assert m["nights_with_slowed_calls"] == int((nights.slowed_calls > 0).sum()) >= m["nights_monitor_recall_at_least_80pct"]
    assert run_pond([*p, "simulate", "--raw", str(small_raw), "--nightly", str(tmp_path / "out"), "--out",
                     str(tmp_path / "sim"), "--metrics", str(tmp_path / "simulate.json"), "--plots",
                     str(tmp_path / "plots_sim")]) == 0
    assert json.loads((tmp_path / "simulate.json").read_text())["answer"]

    params["base"]["as_of"] = "2026-01-02"          # no night with anything before it to train on
    params["backtest"]["nights"] = 2
    assert run_pond(["--params", str(params_file(tmp_path / "short.yaml", params)), "backtest",
                     *backtest_args(small_raw, small_bundle, tmp_path / "short")]) == 2
    assert "no backtest night before 2026-01-02 had VMs to train on" in capsys.readouterr().err


def test_with_touches_judged_a_zNUMA_is_moved_only_where_the_monitor_flags_its_spill(small_raw, small_bundle, tmp_path,
                                                                                     monkeypatch):
    """``qos.touches: judged`` (Pond §4.4): evaluate moves an overpredicted zNUMA to local DRAM only where the monitor
    model flags it at its spilled share, the nights' grids replay what evaluate left slowed for the chosen pair, and
    simulate's scores carry the judgement at every ratio."""
    from pond.evaluation.qos import judged_touches

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    params = small_params()
    params["qos"]["touches"] = "judged"
    assert run_pond(["--params", str(params_file(tmp_path / "params.yaml", params)), "backtest", "2",
                     *backtest_args(small_raw, small_bundle, tmp_path)]) == 0
    out = tmp_path / "out"
    nights = pd.read_csv(out / "nights.csv")
    assert nights.chosen_unmitigated.to_numpy() == pytest.approx(nights.realized_unmitigated.to_numpy(), abs=1e-9)
    touches = judged = 0
    for night in nights.as_of:
        d = pd.read_parquet(out / night / "evaluation" / "decisions.parquet")
        zn = (d.pool_gb > 0) & ~d.li_called & d.overpredicted
        seen = judged_touches(d.touched_known_gb, d.memory_gb - d.pool_gb, d.touch_spill_pct)
        assert (d.flagged[zn] == seen[zn]).all()
        touches, judged = touches + int(zn.sum()), judged + int((zn & seen).sum())
        assert {"touch_spill_pct_r1.82", "touch_spill_pct_r2.22"} <= set(pd.read_parquet(out / night / "scores.parquet"))
    assert touches > 0 and judged < touches           # the monitor leaves some touches on the pool


def test_nights_run_in_processes_give_what_one_process_gives(small_raw, small_bundle, tmp_path, monkeypatch):
    """With ``engine.workers`` 2 the nights run as two runs of consecutive nights, one a process: every file the
    nights write, the nights' lines and the summary are those of the nights run in order in one process."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    got = {}
    for workers in (1, 2):
        params = small_params()
        params["backtest"]["nights"] = 3                 # an uneven split: two nights, then one
        params["engine"]["workers"] = workers
        wd = tmp_path / f"w{workers}"
        assert run_pond(["--params", str(params_file(tmp_path / f"p{workers}.yaml", params)), "backtest",
                         *backtest_args(small_raw, small_bundle, wd)]) == 0
        files = sorted(p.relative_to(wd / "out") for p in (wd / "out").rglob("*") if p.is_file())
        got[workers] = (wd, files)
    (one, files), (two, files2) = got[1], got[2]
    assert files == files2 and any(f.name == "scores_before.parquet" for f in files)
    for f in files:
        if f.suffix == ".parquet":
            pd.testing.assert_frame_equal(pd.read_parquet(one / "out" / f), pd.read_parquet(two / "out" / f))
        elif f.suffix in (".csv", ".json") and f.name != "nights.csv":
            assert (one / "out" / f).read_text() == (two / "out" / f).read_text(), f
    pd.testing.assert_frame_equal(pd.read_csv(one / "out" / "nights.csv"), pd.read_csv(two / "out" / "nights.csv"))
    assert json.loads((one / "backtest.json").read_text()) == json.loads((two / "backtest.json").read_text())
    import os

    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = mlflow.search_runs([mlflow.get_experiment_by_name("pond-backtest").experiment_id])
    pids = runs["tags.pond.pid"].value_counts()       # each night's UM run: 3 from here, then 2 and 1 from two others
    assert pids.get(str(os.getpid())) == 3 and sorted(pids.drop(str(os.getpid())).tolist()) == [1, 2]


def test_the_services_memory_of_flags_runs_through_the_nights_and_without_it_each_night_is_its_own(
        small_backtest, small_raw, small_bundle):
    from pond.core.params import QosParams
    from pond.evaluation.refusal_nights import refusal_rows

    nights = pd.read_csv(small_backtest / "nights.csv")
    dirs = [small_backtest / n for n in nights.as_of]
    off = refusal_rows(dirs, small_bundle / "features" / "vm_features.parquet", small_raw, QosParams(refusal_hours=0),
                       3600)
    assert (off.refused_calls == 0).all()
    assert off.realized_unmitigated_refusing.tolist() == nights.realized_unmitigated.tolist()
    assert off.realized_pool_refusing.tolist() == nights.realized_pool.tolist()
    assert off.served_unmitigated_refusing.tolist() == nights.served_unmitigated.tolist()
    assert off.mitigations_refusing.tolist() == nights.mitigations.tolist()
    # the stage's own (qos.refusal_hours): a refused call keeps at most the pool its LI call had
    assert (nights.realized_pool_refusing <= nights.realized_pool + 1e-12).all()
    assert (nights.refused_calls >= 0).all() and nights.refused_calls.notna().all()
    m = json.loads((small_backtest.parent / "backtest.json").read_text())
    assert m["refusing"]["nights_within_budget"] == int((nights.realized_unmitigated_refusing <= nights.budget).sum())


def test_with_the_memory_every_candidate_pair_refuses_by_its_own_flags_and_the_chosen_one_is_what_the_stage_realized(
        small_backtest, small_raw, small_bundle):
    from pond.core.params import QosParams
    from pond.evaluation.backtest import night_regret
    from pond.evaluation.refusal_nights import refusing_grids
    from pond.models.policy import read_policy

    nights = pd.read_csv(small_backtest / "nights.csv")
    dirs = [small_backtest / n for n in nights.as_of]
    args = (small_bundle / "li", small_bundle / "features" / "vm_features.parquet")
    off, _ = refusing_grids(dirs, *args, QosParams(refusal_hours=0), 3600)
    for d, (pool, left) in zip(dirs, off, strict=True):   # no memory: night_regret's own grids
        _, p0, l0, _ = night_regret(read_policy(d / "policy.json"), args[0], d / "um",
                                    d / "evaluation" / "decisions.parquet", QosParams())
        assert (pool == p0).all() and (left == l0).all()
    grids, chosen = refusing_grids(dirs, *args, QosParams(), 3600)
    assert [float(g[0][c]) for g, c in zip(grids, chosen, strict=True)] == pytest.approx(
        nights.realized_pool_refusing.tolist(), abs=1e-9)
    assert [float(g[1][c]) for g, c in zip(grids, chosen, strict=True)] == pytest.approx(
        nights.realized_unmitigated_refusing.tolist(), abs=1e-9)
    for (pool, _), (p0, _) in zip(grids, off, strict=True):   # a refused call keeps at most its LI call's pool
        assert (pool <= p0 + 1e-12).all() and (pool[0] == p0[0]).all()    # LI off: nothing to refuse
