"""Tonight's headline figures in one table (``pond report``): what an operator reads each morning
instead of ``dvc metrics show``'s thousands of columns. Every figure comes from a stage's metrics
file; a stage that has not run is a row that says so, never a guess."""

from __future__ import annotations

import base64
from html import escape
from typing import Any

Metrics = dict[str, dict[str, Any]]   # stage name -> its metrics/<stage>.json (absent: not run)
HEADLINE_RATIO = "r1.82_pdm5"


def _pct(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{100 * x:.{digits}f}%"


def _get(m: Metrics, stage: str, *keys: str) -> Any:
    node: Any = m.get(stage)
    for k in keys:
        if not isinstance(node, dict) or k not in node:
            return None
        node = node[k]
    return node


def headline(m: Metrics) -> list[tuple[str, str, str]]:
    """(figure, value, where it comes from) rows."""
    rows: list[tuple[str, str, str]] = []

    def row(name: str, stage: str, value: str | None) -> None:
        if stage not in m:
            value = f"not run (metrics/{stage}.json missing)"
        elif value is None:
            value = f"not in metrics/{stage}.json (written by another version?)"
        rows.append((name, value, f"metrics/{stage}.json"))

    li = m.get("train_li", {}).get(HEADLINE_RATIO, {})
    sel, rule = li.get("selection.heldout_li.selected"), li.get("selection.best_rule")
    rule_li = li.get(f"selection.heldout_li.{rule}", float("nan"))
    row("LI at FP 2%, held-out workloads (182%, PDM 5)", "train_li", None if sel is None else
        f"{sel:.1f}% ({li.get('selection.method')}; best rule {rule} {rule_li:.1f}%)")
    um = m.get("train_um", {})
    gbm, static = um.get("gbm.um_at_op4"), um.get("static.um_at_op4")
    row("UM at OP 4%, backtest nights", "train_um",
        None if gbm is None else f"{_pct(gbm)} (static fraction {_pct(static)})")
    o = m.get("optimize", {})
    row("policy (solver)", "optimize", None if not o else
        f"LI threshold {o.get('li_threshold')}, UM target OP {_pct(o.get('um_target_op'))}, expected pool "
        f"{_pct(o.get('pool_share'))}, mispredictions bound {_pct(o.get('mispredictions_bound'), 2)}")
    served = f"served ({_get(m, 'evaluate', 'served_policy') or 'combined'})"
    for key, what in (("combined", "Pond's combined policy"), ("served", served)):
        c = _get(m, "evaluate", key) or {}
        row(f"next day {_get(m, 'evaluate', 'day')}, {what}: pool share, realized mispredictions", "evaluate",
            None if not c else
            f"{_pct(c.get('pool_share'))}, {_pct(c.get('mispredictions_conservative'), 2)} (worst case "
            f"{_pct(c.get('mispredictions_worst_case'), 2)}; budget {_pct(_get(m, 'evaluate', 'budget'), 0)})"
            + ("" if c.get("mispredictions_unmitigated") is None else
               f"; {_pct(c['mispredictions_unmitigated'], 2)} left slowed after {_pct(c.get('mitigations'), 2)} "
               "mitigated by the QoS monitor"))
    b = m.get("backtest", {})
    against = [f"{100 * b[k]:.2f} against {pair}" for k, pair in (
        ("regret_fixed_mean", "the best pair fixed over the nights"),
        ("regret_admitted_mean", "the best fixed pair the lab admits")) if b.get(k) is not None]
    row("backtest: nights within budget after the QoS monitor (before), mean regret", "backtest", None if not b else
        f"{b.get('nights_within_budget')} ({b.get('nights_within_budget_raw')}) of {b.get('nights')}"
        + (f" (of {b['nights_asked']} asked: a shorter trace)" if b.get("nights_skipped_short_history") else "") + ", "
        f"{100 * b.get('regret_mean', float('nan')):.2f} points" + (f" ({'; '.join(against)})" if against else ""))
    if b.get("sla_alpha_gb_share_mean") is not None:
        row("backtest: mitigations' local DRAM, all local vs SLA-alpha (nights within budget)", "backtest",
            f"{_pct(b['mitigated_gb_share_mean'], 3)} vs {_pct(b['sla_alpha_gb_share_mean'], 3)} of the day's memory "
            f"({b.get('nights_within_budget')} vs {b.get('nights_within_budget_sla_alpha')} of {b.get('nights')})")
    s = _get(m, "simulate", "savings_at_headline") or {}
    sockets = _get(m, "simulate", "headline_pool_sockets")
    iv = _get(m, "simulate", "savings_at_headline_interval") or {}

    def saved(name: str) -> str:
        return _pct(s.get(name)) + _span(iv.get(name))

    row(f"DRAM saved at {sockets}-socket pools vs all local (90% interval over clusters)", "simulate", None if not s else
        f"combined {saved('combined_r1.82')} (182%), {saved('combined_r2.22')} (222%); "
        f"UM only {saved('um_only_r1.82')}; static 15% {saved('static_15pct')}")
    st = _get(m, "simulate", "steady_state") or {}
    if st.get("memory_hours_decided_pct") is not None:
        row("replayed window's memory-hours a policy decides (before the VM's creation)", "simulate",
            f"{st['memory_hours_decided_pct']:.2f}% ({st.get('memory_hours_decided_before_creation_pct', 0):.2f}%)")
    a = _get(m, "simulate", "answer")
    row("sizing answer (182%)", "simulate", None if a is None else _answer(a.get("1.82")))
    sv = _get(m, "simulate", "served")
    row("served policy's saving (182%)", "simulate", None if sv is None else _answer(sv.get("1.82"), served=True))
    r = m.get("register", {})
    row("registered", "register", None if not r else
        f"{r.get('model_name')} night {r.get('as_of')}: {'champion' if r.get('promoted') else 'challenger'}")
    return rows


def _answer(a: dict[str, Any] | None, served: bool = False) -> str:
    if a is None:
        return ("the served policy was not replayed at this ratio" if served else
                "no nightly policy at this ratio within the budget (or none replayed): all local")
    if not a["pool_sockets"]:
        if "no_pool_for" not in a and a["policy"] == "all_local":
            return "all local: nothing on a pool, nothing saved"
        named = a.get("no_pool_for", a["policy"])
        return f"no pool: all local is cheapest ({named} within the budget saves nothing), served as all local"
    text = (f"{a['policy']}: {a['pool_sockets']} sockets, {a['local_gb_per_server']:.0f} GB/server + "
            f"{a['gb_per_pool']:.0f} GB/pool, saves {_pct(a['savings'])}{_span(a.get('savings_interval'))} DRAM at "
            f"{_pct(a['realized_mispredictions'], 2)} mispredicted")
    if a.get("undecided_between"):
        best, other = a["undecided_between"]
        lo, hi = a["difference_interval"]
        text += (f"; undecided: {best} against {other} differs by {_pct(lo)} to {_pct(hi)} over clusters, so the "
                 "solver's own policy is named")
    elif a.get("decided"):
        lo, hi = a["difference_interval"]
        text += f"; beats {a['runner_up']} by {_pct(lo)} to {_pct(hi)}"
    return text


def _span(iv: list[float] | None) -> str:
    return "" if not iv else f" [{_pct(iv[0])}, {_pct(iv[1])}]"


def to_markdown(rows: list[tuple[str, str, str]], title: str) -> str:
    lines = [f"# {title}", "", "| figure | value | source |", "| --- | --- | --- |"]
    lines += [f"| {a} | {b.replace('|', '/')} | `{c}` |" for a, b, c in rows]
    return "\n".join(lines) + "\n"


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


def to_text(rows: list[tuple[str, str, str]]) -> str:
    width = max(len(a) for a, _, _ in rows)
    return "\n".join(f"{a:<{width}}  {b}" for a, b, _ in rows)
