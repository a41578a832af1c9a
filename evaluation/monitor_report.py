"""The QoS monitor's held-out figures as a Markdown table (``pond docs`` renders it into docs/monitor.md from
metrics/train_monitor.json), so that the page quotes the committed metrics and nothing copied by hand."""

from __future__ import annotations

from typing import Any

METHODS = (("monitor", "the monitor's model (counters under the allocation)"),
           ("li_model", "the LI model on the same counters"),
           ("l3_miss_latency", "the L3 miss latency alone (Memstrata's counter)"),
           ("pool_stalls", "the stalls the pool explains alone"))


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def monitor_table(m: dict[str, Any]) -> str:
    """One row per latency ratio and method: held-out recall and false alarms; then the slowdown estimate."""
    if not m.get("trained"):
        return f"No monitor model: {m.get('reason', 'metrics/train_monitor.json is missing')}."
    ratios = [k for k, v in m.items() if isinstance(v, dict) and "monitor" in v]
    lines = [("| latency | method | runs past the PDM flagged | false alarms | flagged at <= "
              f"{_pct(m.get('max_false_alarm'))} false alarms, threshold set on these runs |"),
             "| --- | --- | --- | --- | --- |"]
    for r in ratios:
        for key, label in METHODS:
            if key not in m[r]:             # metrics of a model trained before the method was judged
                continue
            f = m[r][key]
            lines.append(f"| x{r} | {label} | {_pct(f.get('recall'))} of {m[r]['runs_exceeding']:,} | "
                         f"{_pct(f.get('false_alarm'))} of {m[r]['runs_within']:,} | "
                         f"{_pct(f.get('recall_at_max_false_alarm'))} |")
    lines += ["", ("| latency | slowdown estimated within 10 points | within 5 points | whole footprint on the pool, "
                   "within 10 points | median error (points) |"), "| --- | --- | --- | --- | --- |"]
    for r in ratios:
        e = m[r].get("slowdown_estimate", {})
        lines.append(f"| x{r} | {_pct(e.get('within_10_points'))} | {_pct(e.get('within_5_points'))} | "
                     f"{_pct(e.get('full_pool_within_10_points'))} | {e.get('median_abs_error_points', 'n/a')} |")
    calls = [r for r in ratios if "calls" in m[r]]
    if calls:
        lines += ["", ("| latency | the called workloads' runs all on the pool: past the PDM (the lab's LI errors) | "
                       "within it | at the spill threshold: flagged, false alarms | at the whole-pool threshold |"),
                  "| --- | --- | --- | --- | --- |"]
        for r in calls:
            c = m[r]["calls"]
            lines.append(f"| x{r} | {c['runs_exceeding']:,} | {c['runs_within']:,} | " + " | ".join(
                f"{_pct(c[k].get('recall'))}, {_pct(c[k].get('false_alarm'))}"
                for k in ("spill_threshold", "whole_pool_threshold")) + " |")
    lines += ["", (f"{m.get('runs', 0):,} spill runs of {m.get('workloads', 0)} workloads at PDM {m.get('pdm')}%; "
                   f"ONNX parity {m.get('onnx_parity_max_abs_diff', float('nan')):.1e}.")]
    return "\n".join(lines)


def monitor_verdict(m: dict[str, Any], target: float = 0.85, camp: tuple[float, float] = (0.91, 0.97)) -> str:
    """What the held-out figures say against the lab target (``target`` of the runs past the PDM flagged at most
    ``max_false_alarm`` false alarms) and against CAMP's published share within 10 points, one line per claim."""
    if not m.get("trained"):
        return f"No monitor model: {m.get('reason', 'metrics/train_monitor.json is missing')}."
    ratios = [k for k, v in m.items() if isinstance(v, dict) and "monitor" in v]
    cap = m.get("max_false_alarm", 0.05)

    def each(method: str) -> str:
        return ", ".join(f"{_pct(m[r][method].get('recall'))} at {_pct(m[r][method].get('false_alarm'))} false "
                         f"alarms (x{r})" for r in ratios)

    met = [r for r in ratios if m[r]["monitor"].get("recall", 0) >= target and m[r]["monitor"].get("false_alarm", 1)
           <= cap]
    verdict = ("meets the lab target at every ratio" if len(met) == len(ratios) else
               f"meets the lab target at {', '.join('x' + r for r in met) or 'no ratio'}")
    est = [m[r].get("slowdown_estimate", {}) for r in ratios]
    return "\n".join([
        (f"- **The monitor's model {verdict}** ({_pct(target)} of the runs past the PDM flagged at no more than "
        f"{_pct(cap)} false alarms, thresholds set on other workloads): {each('monitor')}."),
        f"- **The LI model on the same counters**: {each('li_model')}.",
        f"- **The L3 miss latency alone**: {each('l3_miss_latency')}.",
        *([f"- **The stalls the pool explains alone**: {each('pool_stalls')}."]
          if all("pool_stalls" in m[r] for r in ratios) else []),
        "- **The slowdown estimate**: " + ", ".join(
            f"{_pct(e.get('within_10_points'))} of the held-out runs within 10 points, "
            f"{_pct(e.get('full_pool_within_10_points'))} with the whole footprint on the pool (x{r})"
            for r, e in zip(ratios, est, strict=True)) + f"; CAMP reports {camp[0]:.0%}-{camp[1]:.0%} of workloads."])
