"""`pond backtest` end to end on the small fleet: every night's regret is measured on the candidates
the solver chose from, and the chosen pair replays exactly what `evaluate` realized."""

from __future__ import annotations

import pytest

from core.params import Params
from tests.conftest import small_params

pytestmark = pytest.mark.slow


def test_two_nights_with_regret(small_raw, small_bundle, tmp_path, monkeypatch):
    from pipelines import backtest

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    nights = backtest.run(Params(**small_params()), 2, small_raw, small_bundle / "features", small_bundle / "li",
                          tmp_path / "out", tmp_path / "plots")
    assert len(nights) == 2 and (tmp_path / "out" / "nights.csv").exists()
    assert nights.chosen_pool.to_numpy() == pytest.approx(nights.realized_pool.to_numpy(), abs=1e-9)
    assert nights.chosen_mispredictions.to_numpy() == pytest.approx(nights.realized_mispredictions.to_numpy(),
                                                                    abs=1e-9)
    assert (nights.hindsight_pool >= 0).all()
    assert (nights.regret == nights.hindsight_pool - nights.chosen_pool).all()
    within = nights.chosen_mispredictions <= nights.budget
    assert (nights.regret[within] >= -1e-12).all()   # a feasible choice can never beat the hindsight best
