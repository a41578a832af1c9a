"""Tonight's headline figures in one table (``pond report``): what an operator reads each morning
instead of ``dvc metrics show``'s thousands of columns. Every figure comes from a stage's metrics
file; a stage that has not run is a row that says so, never a guess."""

from __future__ import annotations

import base64
from html import escape
from typing import Any

from pond.models.names import split_ratio

Metrics = dict[str, dict[str, Any]]   # stage name -> its metrics/<stage>.json (absent: not run)
HEADLINE_RATIO = "r1.82_pdm5"
MONITOR_RATIO = "1.82"        # train_monitor's metrics are keyed by latency ratio


LABEL = 34          # a row's label column; with its value, a row fits a 100-column terminal
WIDTH = 100


def _pct(x: float | None, digits: int = 1, sign: bool = False) -> str:
    return "-" if x is None else f"{100 * x:{'+' if sign else ''}.{digits}f}%"


def _get(m: Metrics, stage: str, *keys: str) -> Any:
    node: Any = m.get(stage)
    for k in keys:
        if not isinstance(node, dict) or k not in node:
            return None
        node = node[k]
    return node


def _span(iv: list[float] | None) -> str:
    """A 90% interval in points, ``[-2.0, +8.7]``; nothing where the metrics carry none."""
    return "" if not iv else f" [{100 * iv[0]:+.1f}, {100 * iv[1]:+.1f}]"


def _name(row: str | None) -> str:
    """A policy row's name without its ratio: ``combined_cap30pct_r1.82`` -> ``combined_cap30pct``."""
    return "-" if row is None else split_ratio(row)[0]


def headline(m: Metrics) -> list[tuple[str, str, str]]:
    """(figure, value, where it comes from) rows: one figure per row, its interval beside it where it has one."""
    rows: list[tuple[str, str, str]] = []

    def row(name: str, stage: str, value: str | None) -> None:
        if stage not in m:
            value = f"not run (metrics/{stage}.json missing)"
        elif value is None:
            value = f"not in metrics/{stage}.json (another version?)"
        rows.append((name, value, f"metrics/{stage}.json"))

    li = m.get("train_li", {}).get(HEADLINE_RATIO, {})
    sel, rule = li.get("selection.heldout_li.selected"), li.get("selection.best_rule")
    row("LI at FP 2% (lab, 182%, PDM 5)", "train_li", None if sel is None else
        f"{sel:.1f}%, {li.get('selection.method')} (best rule {rule}: "
        f"{li.get(f'selection.heldout_li.{rule}', float('nan')):.1f}%)")
    q = m.get("train_monitor", {})
    at = q.get(MONITOR_RATIO, {})
    flag = lambda method: at.get(method, {}).get("recall")
    row("QoS monitor (held-out lab, 182%)", "train_monitor",
        ("no spill_counters: /v1/qos uses the LI model" if q.get("trained") is False else None) if not at else
        f"flags {_pct(flag('monitor'))} of runs past the PDM, {_pct(at['monitor'].get('false_alarm'))} false alarms")
    if at:
        row("  LI model, L3 miss latency", "train_monitor",
            f"flag {_pct(flag('li_model'))}, {_pct(flag('l3_miss_latency'))} (Memstrata's counter)")
    um = m.get("train_um", {})
    row("UM at OP 4% (backtest nights)", "train_um", None if um.get("gbm.um_at_op4") is None else
        f"{_pct(um['gbm.um_at_op4'])} (a static fraction: {_pct(um.get('static.um_at_op4'))})")
    o = m.get("optimize", {})
    row("solver: LI threshold, UM target", "optimize", None if not o else
        f"{o.get('li_threshold')}, OP {_pct(o.get('um_target_op'))}: pool {_pct(o.get('pool_share'))}, "
        f"mispredicted <= {_pct(o.get('mispredictions_bound'), 2)}")
    budget = _pct(_get(m, "evaluate", "budget"), 0)
    for key, label in (("combined", "next day: Pond's combined rule"), ("served", "next day: served policy")):
        c = _get(m, "evaluate", key) or {}
        who = f"{_get(m, 'evaluate', 'served_policy') or 'combined'}: " if key == "served" else ""
        row(label, "evaluate", None if not c else
            f"{who}pool {_pct(c.get('pool_share'))}, mispredicted {_pct(c.get('mispredictions_conservative'), 2)} "
            f"(worst {_pct(c.get('mispredictions_worst_case'), 2)}" + (f", budget {budget})" if not who else ")"))
        if c.get("mispredictions_unmitigated") is not None:
            row("  after the QoS monitor", "evaluate", f"{_pct(c['mispredictions_unmitigated'], 2)} left slowed, "
                f"{_pct(c.get('mitigations'), 2)} of VMs mitigated")
    b = m.get("backtest", {})
    row("backtest: nights within budget", "backtest", None if not b else
        f"{b.get('nights_within_budget')} of {b.get('nights')} after the QoS monitor "
        f"({b.get('nights_within_budget_raw')} before)" +
        (f"; {b['nights_asked']} asked" if b.get("nights_skipped_short_history") else ""))
    if b.get("monitor_slowed_calls") is not None:
        row("  QoS monitor on the fleet", "backtest", f"{b['monitor_slowed_calls_flagged']} of "
            f"{b['monitor_slowed_calls']} slowed calls flagged ({_pct(b.get('monitor_recall'))}), >= 80% on "
            f"{b.get('nights_monitor_recall_at_least_80pct')}/{b.get('nights_with_slowed_calls')} nights")
    against = [f"{100 * b[k]:.2f} {pair}" for k, pair in (
        ("regret_fixed_mean", "vs the best fixed pair"), ("regret_admitted_mean", "vs the lab's")) if b.get(k) is not None]
    row("backtest: mean regret (points)", "backtest", None if not b else
        f"{100 * b.get('regret_mean', float('nan')):.2f}" + (f" ({', '.join(against)})" if against else ""))
    if b.get("sla_alpha_gb_share_mean") is not None:
        row("mitigations' local DRAM", "backtest", f"{_pct(b['mitigated_gb_share_mean'], 3)} of the day's memory "
            f"(SLA-alpha: {_pct(b['sla_alpha_gb_share_mean'], 3)})")
    s = _get(m, "simulate", "savings_at_headline") or {}
    sockets = _get(m, "simulate", "headline_pool_sockets")
    iv = _get(m, "simulate", "savings_at_headline_interval") or {}

    def saved(name: str) -> str:
        return "-" if s.get(name) is None else _pct(s[name], sign=True) + _span(iv.get(name))

    for label, name in ((f"DRAM saved, {sockets} sockets: combined", "combined_r1.82"),
                        ("  combined at 222%", "combined_r2.22"), ("  UM only", "um_only_r1.82"),
                        ("  static 15% of every VM", "static_15pct")):
        row(label, "simulate", None if not s else saved(name) + (" at 182%" if name == "combined_r1.82" else ""))
    st = _get(m, "simulate", "steady_state") or {}
    if st.get("memory_hours_decided_pct") is not None:
        row("window's memory-hours decided", "simulate", f"{st['memory_hours_decided_pct']:.2f}% "
            f"({st.get('memory_hours_decided_before_creation_pct', 0):.2f}% before the VM's creation)")
    a = (_get(m, "simulate", "answer") or {}).get("1.82")
    row("sizing answer (182%)", "simulate", None if "simulate" in m and _get(m, "simulate", "answer") is None else
        _answer(a))
    if a and a["pool_sockets"]:
        row("  what it buys", "simulate", f"{a['local_gb_per_server']:.0f} GB/server + {a['gb_per_pool']:.0f} "
            f"GB/pool; {_pct(a['realized_mispredictions'], 2)} mispredicted")
    if a:
        row("  verdict", "simulate", _verdict(a))
    if a and a["policy"] != "all_local" and "difference_interval" in a:
        lo, hi = (100 * x for x in a["difference_interval"])
        reach = "" if a.get("placement_reach") is None else f", the replay's own reach {100 * a['placement_reach']:.1f}"
        row("  difference (points)", "simulate", f"{lo:+.1f} to {hi:+.1f} over clusters (90%){reach}")
    if a and a.get("undecided_between") and (a.get("fallback") or a["policy"] not in a["undecided_between"]):
        row("  the solver's own rule", "simulate",
            _name(a["policy"]) + (f" ({a['fallback']})" if a.get("fallback") else ""))
    if (gap := _get(m, "simulate", "all_local_search_gap")) is not None:   # what the interval over clusters misses
        row("  the search's own noise", "simulate", f"{_pct(gap, 2)} of all local's DRAM below what the sizing found")
    elif _get(m, "simulate", "search") == "scan":
        row("  sizing search", "simulate", "every whole GB up from the peak's need: each size the least that holds")
    sv = (_get(m, "simulate", "served") or {}).get("1.82")
    row("served policy's saving (182%)", "simulate", "not replayed at this ratio" if sv is None else _answer(sv)
        + ("" if sv.get("placement_reach") is None else f"; reach {100 * sv['placement_reach']:.1f}"))
    if sv and sv.get("savings_interval") and sv.get("pool_sockets"):
        row("  does the pool pay", "simulate", _pays(sv))
    r = m.get("register", {})
    row("registered", "register", None if not r else
        f"{r.get('model_name')} night {r.get('as_of')}: {'champion' if r.get('promoted') else 'challenger'}")
    return rows


def closing(m: Metrics) -> str:
    """One line on what the night means for the scheduler: the policy it gets, the memory on the pool, the DRAM."""
    served = _get(m, "evaluate", "served") or {}
    name = _get(m, "evaluate", "served_policy")
    if name is None:
        return "Served: nothing evaluated yet (run `dvc repro`)."
    sv = (_get(m, "simulate", "served") or {}).get("1.82")
    dram = "DRAM not replayed" if sv is None else (
        f"DRAM saved {_pct(sv['savings'], sign=True)}{_span(sv.get('savings_interval'))}"
        + (f" at {sv['pool_sockets']} sockets" if sv.get("pool_sockets") else ""))
    return f"Served: {name}, {_pct(served.get('pool_share'))} of memory pooled, {dram}."


def _answer(a: dict[str, Any] | None) -> str:
    if a is None:
        return "no nightly policy within the budget at this ratio: all local"
    if not a["pool_sockets"]:
        return "all local: no pool size saves DRAM"
    return (f"{_name(a['policy'])}, {a['pool_sockets']} sockets: "
            f"{_pct(a['savings'], sign=True)}{_span(a.get('savings_interval'))}")


def _pays(sv: dict[str, Any]) -> str:
    """Whether the served policy's saving is shown: its interval's low end above 0 and above the replay's own reach
    (leaving out 1% of the VMs moves a saving that far), else which of the two it is within."""
    lo, reach = 100 * sv["savings_interval"][0], 100 * (sv.get("placement_reach") or 0.0)
    if lo <= 0:
        return f"not shown: interval spans 0 (low end {lo:+.1f})"
    if lo <= reach:
        return f"not shown: low end {lo:+.1f} within the replay's own reach {reach:.1f}"
    return f"yes: low end {lo:+.1f}, beyond 0" + ("" if sv.get("placement_reach") is None else
                                                 f" and the replay's own reach {reach:.1f}")


def _verdict(a: dict[str, Any]) -> str:
    """Whether the answer beats its runner-up beyond their paired interval over clusters and, where it was asked,
    beyond the replay's own reach (``simulator.placement_reach``); the difference is the next row."""
    if a["policy"] == "all_local":
        return f"no pool: {_name(a.get('no_pool_for'))} buys none"
    if "difference_interval" not in a:
        return "the point estimate (no cluster draws)"
    if a.get("undecided_between"):
        best, other = (_name(x) for x in a["undecided_between"])
        return f"undecided: {best} vs {other}"
    return f"decided: beats {_name(a.get('runner_up'))}"


def to_markdown(rows: list[tuple[str, str, str]], title: str, last: str | None = None) -> str:
    lines = [f"# {title}", "", "| figure | value | source |", "| --- | --- | --- |"]
    lines += [f"| {a.strip()} | {b.replace('|', '/')} | `{c}` |" for a, b, c in rows]
    return "\n".join(lines + (["", last] if last else [])) + "\n"


def to_html(rows: list[tuple[str, str, str]], title: str, images: dict[str, bytes]) -> str:
    """One self-contained page: the table and every PNG inline (data URIs), for an air-gapped
    network where `dvc plots show`'s page cannot fetch Vega from its CDN."""
    body = [f"<h1>{escape(title)}</h1>", "<table><tr><th>figure</th><th>value</th><th>source</th></tr>"]
    body += [f"<tr><td>{escape(a)}</td><td>{escape(b)}</td><td><code>{escape(c)}</code></td></tr>" for a, b, c in rows]
    body.append("</table>")
    for name, data in images.items():
        body += [f"<h2>{escape(name)}</h2>",
                 f'<img alt="{escape(name)}" src="data:image/png;base64,{base64.b64encode(data).decode()}">']
    style = "body{font-family:sans-serif;margin:2em}td,th{border:1px solid #ccc;padding:4px 8px}img{max-width:100%}"
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"<style>{style}</style></head><body>" + "\n".join(body) + "</body></html>\n")


def to_text(rows: list[tuple[str, str, str]], last: str | None = None) -> str:
    """The rows as a terminal shows them, each within ``WIDTH`` columns, and the closing line."""
    lines = [f"{a:<{LABEL}}  {b}" for a, b, _ in rows]
    return "\n".join(lines + ([last] if last else []))
