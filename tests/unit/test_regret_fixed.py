"""The best pair fixed over every night (evaluation.regret.best_fixed), on grids worked out by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pond.evaluation.regret import best_fixed

# Two nights, 2 LI thresholds x 2 UM targets. Night 1's best within 2% is (1, 0) at 30%, night 2's (1, 1) at 50%;
# only (0, 0) and (0, 1) keep 2% on both, and (0, 1) puts 22.5% on the pool on average.
POOL = [np.array([[0.10, 0.20], [0.30, 0.40]]), np.array([[0.10, 0.25], [0.35, 0.50]])]
MIS = [np.array([[0.00, 0.01], [0.01, 0.03]]), np.array([[0.00, 0.01], [0.03, 0.01]])]


def test_the_fixed_pair_keeps_the_budget_every_night_and_pools_the_most_on_average():
    assert best_fixed(POOL, MIS, 0.02) == (0, 1)
    assert best_fixed(POOL, MIS, 0.03) == (1, 1)          # a looser budget: the largest pair holds on both
    assert best_fixed(POOL[:1], MIS[:1], 0.02) == (1, 0)  # one night: the fixed pair is that night's best


def test_no_pair_holds_every_night():
    assert best_fixed(POOL, [m + 0.05 for m in MIS], 0.02) is None
    assert best_fixed([], [], 0.02) is None


@pytest.mark.parametrize(("judged", "severe"), [(False, False), (True, False), (False, True), (True, True)])
def test_the_unmitigated_grid_is_what_the_monitor_leaves_for_every_pair(judged, severe):
    """Each pair replayed with `decide` and judged by `evaluation.qos.watch` / `summarize` (capacity spent in order
    of creation, false alarms included) gives the grid's figure, on a night whose rows are not in creation order.
    ``judged``: a zNUMA's touch is flagged only where its spill reaches the share the monitor flags it at (Pond
    §4.4), which differs per VM and per pair. ``severe``: the count keeps only some overpredictions per UM target
    (those slowed past the PDM), while every touch still asks for the monitor's capacity."""
    from pond.evaluation.qos import summarize, watch
    from pond.evaluation.regret import unmitigated_grid
    from pond.models.decision import POOL_ONLY, ZNUMA, PolicyKnobs, decide

    rng = np.random.default_rng(12)
    n = 400
    night = pd.DataFrame({
        "memory_gb": rng.choice([2.0, 8.0, 32.0], n), "has_history": rng.random(n) < 0.8,
        "p_insensitive": np.where(rng.random(n) < 0.05, np.nan, np.round(rng.random(n), 2)),
        "um_raw": rng.random(n), "sensitive": rng.choice([0.0, 1.0, np.nan], n, p=[0.6, 0.2, 0.2]),
        "touched_known_gb": np.where(rng.random(n) < 0.1, np.nan, rng.random(n) * 30),
        "seen_slowed": rng.random(n) < 0.45,
        "created_at": pd.Timestamp("2026-01-09", tz="UTC") + pd.to_timedelta(rng.permutation(n), unit="s")})
    thresholds, offsets = np.array([np.inf, 0.5, 0.8]), np.array([np.nan, 0.0, 0.2])
    q = np.array([0.0, 0.03, 0.01])
    least = rng.choice([0.0, 20.0, 60.0, np.inf], n) if judged else None
    counted = rng.random((len(offsets), n)) < 0.3 if severe else None
    grid = unmitigated_grid(night, thresholds, offsets, q, 0.02, chunk=2, touch_spill_pct=least, counted=counted)
    mem, p, sens = night.memory_gb.to_numpy(), night.p_insensitive.to_numpy(), night.sensitive.to_numpy()
    for i, t in enumerate(thresholds):
        for j, off in enumerate(offsets):
            d = decide(mem, night.has_history.to_numpy(), p, night.um_raw.to_numpy(),
                       PolicyKnobs(None if np.isinf(t) else t, None if np.isnan(off) else off))
            called = d["decision"] == POOL_ONLY
            with np.errstate(invalid="ignore"):
                op = (d["decision"] == ZNUMA) & (night.touched_known_gb.to_numpy() > d["local_gb"] + 1e-9)
            out = pd.DataFrame({"memory_gb": mem, "pool_gb": d["pool_gb"], "li_called": called,
                                "false_positive": called & (sens == 1.0), "overpredicted": op, "sensitive": sens,
                                "lab_truth": ~np.isnan(sens)})
            touched = night.touched_known_gb.to_numpy()
            with np.errstate(invalid="ignore", divide="ignore"):
                seen = None if least is None else 100 * (touched - d["local_gb"]) / touched >= least
            watched = watch(out, night.seen_slowed.to_numpy(), night.created_at.to_numpy(), 0.02, touch_seen=seen)
            if counted is not None:
                left = (out.false_positive | (op & counted[j])) & ~watched.mitigated
                assert left.sum() < watched.unmitigated.sum() or not op.any()
                watched = watched.assign(unmitigated=left)
            if least is not None and i == 0 and j == 2:
                assert 0 < (seen & op).sum() < op.sum()           # some touches judged, some not
            assert grid[i, j] == pytest.approx(summarize(watched, q[i])["mispredictions_unmitigated"]), (t, off)
    assert (grid[1:] > 0).all()
