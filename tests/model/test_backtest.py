"""`pond backtest` end to end on the small fleet: every night's regret is measured on the candidates
the solver chose from, and the chosen pair replays exactly what `evaluate` realized."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.conftest import backtest_args, params_file, run_pond, small_params

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("variant", ["pond", "walks"])
def test_two_nights_with_regret(variant, request, tmp_path, monkeypatch):
    """Both built-in fleet variants (issue 13): the walks fleet's mechanisms differ, the contract does not."""
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
    # the QoS monitor (issue 48): it only takes mispredictions away, at most 1% of each day's VMs
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
