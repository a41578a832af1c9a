"""The figures of the default run that the pages quote are rendered from the metrics: exact text from known metrics,
a stage that has not run said so, and a hand-edited figure put back by `pond docs` (so ``pond docs --check`` fails on
it: tests/unit/test_reference.py)."""

from __future__ import annotations

import json
import shutil

from pond.evaluation import results_pages as rp
from tests.conftest import ROOT


def _metrics() -> dict:
    return {p.stem: json.loads(p.read_text()) for p in (ROOT / "metrics").glob("*.json")}


def test_a_stage_that_has_not_run_is_said_not_guessed():
    assert rp.li_figures({}) == "Not run: metrics/train_li.json missing."
    assert rp.budget_figures({"optimize": {}}) == "Not run: metrics/evaluate.json, metrics/backtest.json missing."


def test_known_metrics_give_known_text():
    li = {"r1.82_pdm5": {"selection.method": "random_forest", "selection.heldout_li.selected": 45.63,
                         "selection.best_rule": "dram_bound", "selection.margin_over_best_rule": 0.51,
                         **{f"{r}.li_at_fp{fp}": 10.0 * fp for r in ("random_forest", "dram_bound", "memory_bound",
                                                                    "l3_miss_latency") for fp in (1, 2, 5)},
                         "selection.heldout_li.random_forest": 46.84}}
    text = rp.li_figures({"train_li": li})
    assert text.startswith("At 182% latency, PDM 5%: selected `random_forest`, 45.6% on outer held-out halves "
                           "(best single-counter rule `dram_bound`, margin +0.51 points).")
    assert "| `random_forest` | 10.0% | 20.0% | 50.0% | 46.8% |" in text
    um = rp.um_figures({"train_um": {"gbm.um_at_op4": 0.32887, "static.um_at_op4": 0.10019, "gbm.op_at_um10": 0.00215}})
    assert "| untouched memory on zNUMA at 4% overpredicted VMs | 32.9% | 10.0% |" in um
    assert "| overpredicted VMs at 10% untouched memory | 0.21% | -% |" not in um     # a missing figure is "-"
    assert "| overpredicted VMs at 10% untouched memory | 0.21% | - |" in um
    sim = {"simulate": {"headline_pool_sockets": 16, "policies": {"um_only_r1.82": {
        "at_headline": {"savings": -0.01521, "savings_interval": [-0.08312, 0.06012]}, "recommended_pool_sockets": 0,
        "recommended": {"savings": 0.0}}}, "answer": {"1.82": {"decided": False, "policy": "combined_r1.82",
                                                                "pool_sockets": 64, "savings": 0.0316,
                                                                "savings_interval": [-0.07993, 0.16504],
                                                                "undecided_between": ["um_only_r1.82", "combined_r1.82"],
                                                                "difference_interval": [-0.06469, 0.08496]}}}}
    text = rp.dram_figures(sim)
    assert "| `um_only` (1.82) | -1.5% [-8.3, +6.0] | - | no pool | 0.0% | - |" in text
    assert ("- Sizing answer at 182%: `combined` on 64-socket pools, 3.2% [-8.0, +16.5] DRAM saved (undecided "
            "between `um_only` and `combined`; difference with the runner-up [-6.5, +8.5]).") in text


def test_a_hand_edited_figure_is_rendered_back(tmp_path):
    pages = [rp.README, rp.TONIGHT, rp.MONITOR, *(rp.RESULTS / f"{name}.md" for name in rp.PAGES)]
    for page in pages:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / page, tmp_path / page)
    budget = tmp_path / rp.RESULTS / "budget.md"
    committed = budget.read_text()
    edited = committed.replace("| `combined` | ", "| `combined` | 99.9% (edited) ", 1)
    assert edited != committed
    budget.write_text(edited)
    out = rp.rendered_pages(tmp_path, _metrics())
    assert out[rp.RESULTS / "budget.md"] == committed
    assert all(out[page] == (ROOT / page).read_text() for page in pages)
