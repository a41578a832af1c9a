"""`pond report`: the headline table from hand-made metrics, and stages that did not run."""

from __future__ import annotations

import json

from pond.evaluation.report import headline, to_markdown
from tests.conftest import run_pond

METRICS = {
    "train_li": {"r1.82_pdm5": {"selection.heldout_li.selected": 45.38, "selection.method": "random_forest",
                                "selection.best_rule": "dram_bound", "selection.heldout_li.dram_bound": 45.13}},
    "train_um": {"gbm.um_at_op4": 0.287, "static.um_at_op4": 0.063},
    "optimize": {"li_threshold": 0.52, "um_target_op": 0.005, "pool_share": 0.487, "mispredictions_bound": 0.0199},
    "evaluate": {"day": "2026-01-29", "budget": 0.02, "combined": {"pool_share": 0.5, "mispredictions_conservative":
                                                                    0.0191, "mispredictions_worst_case": 0.0255,
                                                                    "mispredictions_unmitigated": 0.0094,
                                                                    "mitigations": 0.01},
                 "served": {"pool_share": 0.17, "mispredictions_conservative": 0.0081,
                            "mispredictions_worst_case": 0.0102}, "served_policy": "um_only"},
    "simulate": {"headline_pool_sockets": 16, "savings_at_headline": {"combined_r1.82": 0.09, "combined_r2.22": 0.07,
                                                                      "static_15pct": 0.03},
                 "answer": {"1.82": {"policy": "um_only_r1.82", "pool_sockets": 16, "local_gb_per_server": 579.4,
                                     "gb_per_pool": 774.0, "savings": 0.0896, "realized_mispredictions": 0.0088}},
                 "served": {"1.82": {"policy": "combined_cap30pct_r1.82", "pool_sockets": 32,
                                     "local_gb_per_server": 601.2, "gb_per_pool": 640.0, "savings": 0.0816,
                                     "realized_mispredictions": None}},
                 "policies": {"combined_r1.82": {"recommended_pool_sockets": 16}}},
    "register": {"model_name": "pond-znuma", "as_of": "2026-01-28", "promoted": False},
}


def test_headline_rows_read_each_stage():
    rows = dict((a, b) for a, b, _ in headline(METRICS))
    assert rows["LI at FP 2%, held-out workloads (182%, PDM 5)"] == "45.4% (random_forest; best rule dram_bound 45.1%)"
    assert rows["UM at OP 4%, backtest nights"] == "28.7% (static fraction 6.3%)"
    day = "next day 2026-01-29, {}: pool share, realized mispredictions"
    assert rows[day.format("Pond's combined policy")] == \
        "50.0%, 1.91% (worst case 2.55%; budget 2%); 0.94% left slowed after 1.00% mitigated by the QoS monitor"
    assert rows[day.format("served (um_only)")] == "17.0%, 0.81% (worst case 1.02%; budget 2%)"
    assert rows["DRAM saved at 16-socket pools vs all local (90% interval over clusters)"] == \
        "combined 9.0% (182%), 7.0% (222%); UM only -; static 15% 3.0%"
    assert rows["sizing answer (182%)"] == \
        "um_only_r1.82: 16 sockets, 579 GB/server + 774 GB/pool, saves 9.0% DRAM at 0.88% mispredicted"
    assert rows["served policy's saving (182%)"] == \
        "combined_cap30pct_r1.82: 32 sockets, 601 GB/server + 640 GB/pool, saves 8.2% DRAM at - mispredicted"
    assert rows["registered"] == "pond-znuma night 2026-01-28: challenger"
    assert rows["backtest: nights within budget after the QoS monitor (before), mean regret"] == \
        "not run (metrics/backtest.json missing)"


def test_savings_carry_their_intervals_and_an_undecided_answer_says_so():
    m = {"simulate": {"headline_pool_sockets": 16, "savings_at_headline": {"combined_r1.82": 0.09},
                      "savings_at_headline_interval": {"combined_r1.82": [0.05, 0.12]},
                      "steady_state": {"memory_hours_decided_pct": 99.5,
                                       "memory_hours_decided_before_creation_pct": 61.25},
                      "answer": {"1.82": {"policy": "combined_r1.82", "pool_sockets": 16, "local_gb_per_server": 500,
                                          "gb_per_pool": 700, "savings": 0.09, "savings_interval": [0.05, 0.12],
                                          "realized_mispredictions": 0.01, "decided": False,
                                          "undecided_between": ["um_only_r1.82", "combined_r1.82"],
                                          "difference_interval": [-0.01, 0.03]}}}}
    rows = dict((a, b) for a, b, _ in headline(m))
    assert rows["DRAM saved at 16-socket pools vs all local (90% interval over clusters)"] == \
        "combined 9.0% [5.0%, 12.0%] (182%), - (222%); UM only -; static 15% -"
    assert rows["replayed window's memory-hours a policy decides (before the VM's creation)"] == "99.50% (61.25%)"
    assert rows["sizing answer (182%)"] == (
        "combined_r1.82: 16 sockets, 500 GB/server + 700 GB/pool, saves 9.0% [5.0%, 12.0%] DRAM at 1.00% "
        "mispredicted; undecided: um_only_r1.82 against combined_r1.82 differs by -1.0% to 3.0% over clusters, so "
        "the solver's own policy is named")


def test_the_backtest_row_gives_each_yardstick_the_metrics_hold():
    row = "backtest: nights within budget after the QoS monitor (before), mean regret"
    b = {"nights": 14, "nights_within_budget": 14, "nights_within_budget_raw": 13, "regret_mean": 0.0435}
    assert dict((a, v) for a, v, _ in headline({"backtest": b}))[row] == "14 (13) of 14, 4.35 points"
    b |= {"regret_fixed_mean": 0.0186, "regret_admitted_mean": -0.0012}
    assert dict((a, v) for a, v, _ in headline({"backtest": b}))[row] == (
        "14 (13) of 14, 4.35 points (1.86 against the best pair fixed over the nights; -0.12 against the best fixed "
        "pair the lab admits)")
    short = {"nights": 9, "nights_within_budget": 9, "nights_within_budget_raw": 8, "regret_mean": 0.0435,
             "nights_asked": 14, "nights_skipped_short_history": 5}     # a 28-day trace: the nights it allows
    assert dict((a, v) for a, v, _ in headline({"backtest": short}))[row] == \
        "9 (8) of 9 (of 14 asked: a shorter trace), 4.35 points"


def test_markdown_has_one_row_per_figure():
    text = to_markdown(headline(METRICS), "night")
    assert text.startswith("# night\n") and text.count("\n| ") == 1 + 1 + len(headline(METRICS))


def test_cli_writes_markdown_and_refuses_an_empty_dir(tmp_path, capsys):
    for stage, m in METRICS.items():
        (tmp_path / f"{stage}.json").write_text(json.dumps(m))
    assert run_pond(["report", "--metrics-dir", str(tmp_path), "--out", str(tmp_path / "r.md")]) == 0
    assert "pond-znuma, night 2026-01-28" in (tmp_path / "r.md").read_text()
    assert "16 sockets" in capsys.readouterr().out
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run_pond(["report", "--metrics-dir", str(empty), "--out", str(tmp_path / "x.md")]) == 2
    assert not (tmp_path / "x.md").exists()
    (empty / "optimize.json").write_text("{not json")
    capsys.readouterr()
    assert run_pond(["report", "--metrics-dir", str(empty), "--out", str(tmp_path / "x.md")]) == 2
    assert "not JSON" in capsys.readouterr().err


def test_html_page_is_self_contained(tmp_path):
    """The offline page: every plot inline as a data URI, no outside URL (issue 17)."""
    import base64

    for stage, m in METRICS.items():
        (tmp_path / f"{stage}.json").write_text(json.dumps(m))
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
    (tmp_path / "plots" / "simulate").mkdir(parents=True)
    (tmp_path / "plots" / "simulate" / "savings.png").write_bytes(png)
    assert run_pond(["report", "--metrics-dir", str(tmp_path), "--out", str(tmp_path / "r.md"),
                 "--plots-dir", str(tmp_path / "plots")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert f"data:image/png;base64,{base64.b64encode(png).decode()}" in page
    assert "<h2>simulate/savings.png</h2>" in page and "16 sockets" in page
    assert "://" not in page and "src=\"http" not in page
