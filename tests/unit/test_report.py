"""`pond report`: the headline table from hand-made metrics, and stages that did not run."""

from __future__ import annotations

import json

from pond.evaluation.report import closing, headline, to_markdown, to_text
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
    rows = {a: b for a, b, _ in headline(METRICS)}
    want = {"LI at FP 2% (lab, 182%, PDM 5)": "45.4%, random_forest (best rule dram_bound: 45.1%)",
            "UM at OP 4% (backtest nights)": "28.7% (a static fraction: 6.3%)",
            "next day: Pond's combined rule": "pool 50.0%, mispredicted 1.91% (worst 2.55%, budget 2%)",
            "  after the QoS monitor": "0.94% left slowed, 1.00% of VMs mitigated",
            "next day: served policy": "um_only: pool 17.0%, mispredicted 0.81% (worst 1.02%)",
            "DRAM saved, 16 sockets: combined": "+9.0% at 182%",
            "  combined at 222%": "+7.0%",
            "  UM only": "-",
            "  static 15% of every VM": "+3.0%",
            "sizing answer (182%)": "um_only, 16 sockets: +9.0%",
            "  what it buys": "579 GB/server + 774 GB/pool; 0.88% mispredicted",
            "  verdict": "the point estimate (no cluster draws)",
            "served policy's saving (182%)": "combined_cap30pct, 32 sockets: +8.2%",
            "registered": "pond-znuma night 2026-01-28: challenger",
            "backtest: nights within budget": "not run (metrics/backtest.json missing)"}
    assert {k: rows.get(k) for k in want} == want
    assert closing(METRICS) == "Served: um_only, 17.0% of memory pooled, DRAM saved +8.2% at 32 sockets."


def test_every_line_fits_a_100_column_terminal():
    m = json.loads(json.dumps(METRICS))
    m["backtest"] = {"nights": 14, "nights_within_budget": 9, "nights_within_budget_raw": 8, "regret_mean": 0.0435,
                     "regret_fixed_mean": 0.0186, "regret_admitted_mean": -0.0012, "nights_asked": 14,
                     "nights_skipped_short_history": 5, "mitigated_gb_share_mean": 0.00648,
                     "sla_alpha_gb_share_mean": 0.00601}
    m["simulate"]["savings_at_headline_interval"] = {k: [-0.186, 0.11] for k in m["simulate"]["savings_at_headline"]}
    m["simulate"]["answer"]["1.82"] |= {"policy": "combined_cap30pct_r1.82", "savings_interval": [-0.02, 0.087],
                                        "undecided_between": ["um_only_r1.82", "combined_cap30pct_r1.82"],
                                        "difference_interval": [-0.034, 0.056], "decided": False}
    text = to_text(headline(m), closing(m))
    assert max(len(line) for line in text.splitlines()) <= 100, text
    assert "undecided: um_only vs combined_cap30pct" in text and "-3.4 to +5.6 over clusters (90%)" in text


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
    rows = {a: b for a, b, _ in headline(m)}
    assert "  the search's own noise" not in rows                   # a replay that does not search
    m["simulate"]["all_local_search_gap"] = 0.01349
    rows = {a: b for a, b, _ in headline(m)}
    assert rows["  the search's own noise"] == "1.35% of all local's DRAM below what the sizing found"
    scanned = {a: b for a, b, _ in headline({**m, "simulate": {**m["simulate"], "all_local_search_gap": None,
                                                                 "search": "scan"}})}
    assert "  the search's own noise" not in scanned
    assert scanned["  sizing search"] == "every whole GB up from the peak's need: each size the least that holds"
    want = {"DRAM saved, 16 sockets: combined": "+9.0% [+5.0, +12.0] at 182%",
            "  combined at 222%": "-",
            "window's memory-hours decided": "99.50% (61.25% before the VM's creation)",
            "sizing answer (182%)": "combined, 16 sockets: +9.0% [+5.0, +12.0]",
            "  verdict": "undecided: um_only vs combined", "  difference (points)": "-1.0 to +3.0 over clusters (90%)"}
    assert "  the solver's own rule" not in rows                         # one of the two it cannot tell apart
    assert {k: rows.get(k) for k in want} == want
    # neither of the two it cannot tell apart: the solver's own rule is named, and the verdict says why
    m["simulate"]["answer"]["1.82"] |= {"policy": "combined_cap30pct_r1.82",
                                        "undecided_between": ["li_only_r1.82", "um_only_r1.82"]}
    rows = {a: b for a, b, _ in headline(m)}
    assert rows["  verdict"] == "undecided: li_only vs um_only"
    assert rows["  the solver's own rule"] == "combined_cap30pct"


def test_a_verdict_gives_the_replay_s_own_reach_where_it_was_asked():
    a = {"policy": "combined_cap30pct_r1.82", "pool_sockets": 64, "savings": 0.0489, "decided": False,
         "local_gb_per_server": 254, "gb_per_pool": 2006, "realized_mispredictions": 0.0162,
         "difference_interval": [0.0129, 0.0526], "placement_reach": 0.028,
         "undecided_between": ["um_only_r1.82", "combined_cap30pct_r1.82"]}
    rows = {x: y for x, y, _ in headline({"simulate": {"answer": {"1.82": a}}})}
    assert rows["  verdict"] == "undecided: um_only vs combined_cap30pct"
    assert rows["  difference (points)"] == "+1.3 to +5.3 over clusters (90%), the replay's own reach 2.8"
    a |= {"decided": True, "placement_reach": 0.004, "runner_up": "combined_cap30pct_r1.82"}
    del a["undecided_between"]
    rows = {x: y for x, y, _ in headline({"simulate": {"answer": {"1.82": a}}})}
    assert rows["  verdict"] == "decided: beats combined_cap30pct"
    assert rows["  difference (points)"] == "+1.3 to +5.3 over clusters (90%), the replay's own reach 0.4"
    served = {"policy": "combined_cap30pct_r1.82", "pool_sockets": 64, "savings": 0.0578,
              "savings_interval": [0.0274, 0.0927], "placement_reach": 0.0112}
    line = [(x, y) for x, y, _ in headline({"simulate": {"answer": {"1.82": a}, "served": {"1.82": served}}})
            if x.startswith("served policy's saving")]
    assert line == [("served policy's saving (182%)", "combined_cap30pct, 64 sockets: +5.8% [+2.7, +9.3]; reach 1.1")]
    assert len(to_text([(*line[0], "simulate")])) <= 100


def test_the_report_says_whether_the_served_pool_pays_and_which_rule_kept_its_cap():
    a = {"policy": "combined_cap30pct_r1.82", "pool_sockets": 64, "savings": 0.0248, "decided": False,
         "local_gb_per_server": 316, "gb_per_pool": 1959, "realized_mispredictions": 0.0198,
         "difference_interval": [-0.0071, 0.0094], "fallback": "30% cap kept: no cap beats it",
         "undecided_between": ["combined_cap15pct_r1.82", "combined_cap20pct_r1.82"]}
    served = {"policy": "combined_cap30pct_r1.82", "pool_sockets": 64, "savings": 0.0578,
              "savings_interval": [0.0274, 0.0927], "placement_reach": 0.0031}

    def rows(sv: dict) -> dict[str, str]:
        return {x: y for x, y, _ in headline({"simulate": {"answer": {"1.82": a}, "served": {"1.82": sv}}})}

    got = rows(served)
    assert got["  verdict"] == "undecided: combined_cap15pct vs combined_cap20pct"
    assert got["  the solver's own rule"] == "combined_cap30pct (30% cap kept: no cap beats it)"
    assert got["  does the pool pay"] == "yes: low end +2.7, beyond 0 and the replay's own reach 0.3"
    assert rows(served | {"placement_reach": 0.1263})["  does the pool pay"] == (
        "not shown: low end +2.7 within the replay's own reach 12.6")
    assert rows(served | {"savings_interval": [-0.0088, 0.0502]})["  does the pool pay"] == (
        "not shown: interval spans 0 (low end -0.9)")
    assert rows(served | {"placement_reach": None})["  does the pool pay"] == "yes: low end +2.7, beyond 0"
    assert "  does the pool pay" not in rows(served | {"pool_sockets": 0})           # all local: nothing to pay
    assert max(len(line) for line in to_text([(k, v, "simulate") for k, v in got.items()]).splitlines()) <= 100


def test_an_answer_that_buys_no_pool_says_all_local():
    a = {"policy": "all_local", "pool_sockets": 0, "savings": 0.0, "savings_interval": [0.0, 0.0],
         "no_pool_for": "combined_r1.82", "decided": True, "difference_interval": [0.0, 0.0]}
    rows = {x: y for x, y, _ in headline({"simulate": {"answer": {"1.82": a}}})}
    assert rows["sizing answer (182%)"] == "all local: no pool size saves DRAM"
    assert rows["  verdict"] == "no pool: combined buys none" and "  what it buys" not in rows


def test_the_backtest_rows_give_each_yardstick_the_metrics_hold():
    b = {"nights": 14, "nights_within_budget": 14, "nights_within_budget_raw": 13, "regret_mean": 0.0435}
    rows = {a: v for a, v, _ in headline({"backtest": b})}
    assert rows["backtest: nights within budget"] == "14 of 14 after the QoS monitor (13 before)"
    assert rows["backtest: mean regret (points)"] == "4.35"
    b |= {"regret_fixed_mean": 0.0186, "regret_admitted_mean": -0.0012}
    rows = {a: v for a, v, _ in headline({"backtest": b})}
    assert rows["backtest: mean regret (points)"] == "4.35 (1.86 vs the best fixed pair, -0.12 vs the lab's)"
    assert "  QoS monitor on the fleet" not in rows                       # a backtest from before it was counted
    b |= {"monitor_slowed_calls": 147, "monitor_slowed_calls_flagged": 124, "monitor_recall": 124 / 147,
          "nights_monitor_recall_at_least_80pct": 9, "nights_with_slowed_calls": 14}
    rows = {a: v for a, v, _ in headline({"backtest": b})}
    assert rows["  QoS monitor on the fleet"] == "124 of 147 slowed calls flagged (84.4%), >= 80% on 9/14 nights"
    short = {"nights": 9, "nights_within_budget": 9, "nights_within_budget_raw": 8, "regret_mean": 0.0435,
             "nights_asked": 14, "nights_skipped_short_history": 5}     # a 28-day trace: the nights it allows
    assert {a: v for a, v, _ in headline({"backtest": short})}["backtest: nights within budget"] == \
        "9 of 9 after the QoS monitor (8 before); 14 asked"


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
    """The offline page: every plot inline as a data URI, no outside URL."""
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
