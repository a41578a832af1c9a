"""The figures of the default run that the README and the docs quote (the results pages, docs/results/*.md, among
them), rendered from the stages' metrics files by `pond docs`, so that a page cannot quote a figure the metrics do
not hold. Each function takes the metrics
(``evaluation.report.Metrics``) and returns the Markdown that stands between the page's markers; a stage that has
not run says so."""

from __future__ import annotations

import csv
import itertools
from pathlib import Path
from typing import Any

from pond.core.docs import MONITOR_BEGIN, MONITOR_END, REPORT_BEGIN, REPORT_END, between, table
from pond.evaluation.monitor_report import monitor_table, monitor_verdict
from pond.evaluation.report import Metrics, closing, headline, to_text
from pond.models.names import split_ratio

LI_RULES = ("random_forest", "dram_bound", "memory_bound", "l3_miss_latency")
POLICIES = ("combined", "li_only", "um_only", "static_10pct", "static_15pct")
RESULTS = Path("docs/results")
README, TONIGHT, MONITOR = Path("README.md"), Path("docs/tonight.md"), Path("docs/monitor.md")
SAVINGS = Path("plots/simulate/savings.csv")
# static share (%) -> pool sockets -> (provider, own peaks[, peaks on the trace's servers]) %
Savings = dict[int, dict[int, tuple[float, ...]]]


def _pct(x: Any, digits: int = 1, scale: float = 100.0) -> str:
    return "-" if not isinstance(x, (int, float)) else f"{scale * x:.{digits}f}%"


def _iv(iv: Any) -> str:
    return "" if not isinstance(iv, list) or len(iv) != 2 else f" [{100 * iv[0]:+.1f}, {100 * iv[1]:+.1f}]"


def _missing(m: Metrics, *stages: str) -> str | None:
    gone = [s for s in stages if s not in m]
    return None if not gone else "Not run: " + ", ".join(f"metrics/{s}.json" for s in gone) + " missing."


def li_figures(m: Metrics) -> str:
    """Held-out LI (share of lab workloads called insensitive) at FP 1/2/5%, per model and ratio, and the choice."""
    if (gone := _missing(m, "train_li")) is not None:
        return gone
    out = []
    for key, node in m["train_li"].items():
        rows = [(f"`{r}`", *(f"{node.get(f'{r}.li_at_fp{fp}', float('nan')):.1f}%" for fp in (1, 2, 5)),
                 f"{node.get(f'selection.heldout_li.{r}', float('nan')):.1f}%") for r in LI_RULES]
        ratio, pdm = key[1:].split("_pdm")
        out += [(f"At {float(ratio):.0%} latency, PDM {pdm}%: selected `{node.get('selection.method')}`, "
                f"{node.get('selection.heldout_li.selected', float('nan')):.1f}% on outer held-out halves "
                f"(best single-counter rule `{node.get('selection.best_rule')}`, margin "
                f"{node.get('selection.margin_over_best_rule', float('nan')):+.2f} points)."), "",
                *table(("model", "LI at FP 1%", "LI at FP 2%", "LI at FP 5%", "held-out, FP 2%"), rows), ""]
    return "\n".join(out).rstrip()


def um_figures(m: Metrics) -> str:
    """The GBM against a static fraction on the backtest's nights, and the offset's calibration."""
    if (gone := _missing(m, "train_um")) is not None:
        return gone
    u = m["train_um"]
    rows = [("untouched memory on zNUMA at 4% overpredicted VMs", _pct(u.get("gbm.um_at_op4")),
             _pct(u.get("static.um_at_op4"))),
            ("overpredicted VMs at 10% untouched memory", _pct(u.get("gbm.op_at_um10"), 2),
             _pct(u.get("static.op_at_um10"), 2)),
            ("overpredicted VMs at 20% untouched memory", _pct(u.get("gbm.op_at_um20"), 2),
             _pct(u.get("static.op_at_um20"), 2))]
    nights = u.get("backtest_nights")
    return "\n".join([
        *table(("figure", "LightGBM quantile model", "static fraction"), rows), "",
        (f"Over {nights} nights ({u.get('backtest_scored_vms')} VMs scored the next day), the offset calibrated to "
        f"OP {_pct(u.get('target_op'), 0)} realized OP {_pct(u.get('calibrated.mean_op'), 2)} on average "
        f"(raw: {_pct(u.get('raw.mean_op'), 2)}) and was within it on "
        f"{_pct(u.get('calibrated.nights_within_target'), 0)} of the nights, with "
        f"{_pct(u.get('calibrated.mean_um'))} of memory predicted untouched. ONNX parity: "
        f"{u.get('onnx_parity_max_abs_diff')} (largest absolute difference from LightGBM).")])


def budget_figures(m: Metrics) -> str:
    """Tonight's pair, the next day per policy, and the backtest's nights."""
    if (gone := _missing(m, "optimize", "evaluate", "backtest")) is not None:
        return gone
    o, e, b = m["optimize"], m["evaluate"], m["backtest"]
    rows = [(f"`{p}`", _pct(e[p].get("pool_share")), _pct(e[p].get("mispredictions_conservative"), 2),
             _pct(e[p].get("mispredictions_worst_case"), 2), _pct(e[p].get("mispredictions_unmitigated"), 2),
             _pct(e[p].get("mitigations"), 2))
            for p in POLICIES if isinstance(e.get(p), dict)]
    return "\n".join([
        (f"Tonight's solver: LI threshold {o.get('li_threshold')}, UM target OP {_pct(o.get('um_target_op'), 1)}; "
        f"expected pool {_pct(o.get('pool_share'))}, mispredictions {_pct(o.get('mispredictions'), 2)} "
        f"(bound {_pct(o.get('mispredictions_bound'), 2)}, budget {_pct(e.get('budget'), 0)})."), "",
        f"The next day ({e.get('day')}), per policy:", "",
        *table(("policy", "memory on the pool", "mispredicted", "worst case", "left slowed after the monitor",
                "VMs mitigated"), rows), "",
        (f"Backtest, {b.get('nights')} nights: within the budget on {b.get('nights_within_budget')} after the QoS "
        f"monitor ({b.get('nights_within_budget_raw')} before it, {b.get('nights_within_budget_worst_case')} "
        f"counting every censored VM overpredicted); most mitigated in a night {_pct(b.get('mitigations_max'), 2)}; "
        f"pool {_pct(b.get('realized_pool_mean'))} on average; mean regret {100 * b.get('regret_mean', 0):.2f} points "
        f"against each night's best pair in hindsight, {100 * b.get('regret_fixed_mean', 0):.2f} against the best "
        f"fixed pair, {100 * b.get('regret_admitted_mean', 0):.2f} against the best pair the lab admits.")])


def _slowed(policy: dict) -> str:
    """The window's VMs mispredicted, then left slowed after the QoS monitor, at each ratio the policy is judged at."""
    raw, left = policy.get("realized_mispredictions", {}), policy.get("realized_unmitigated", {})
    return " / ".join(f"{_pct(raw[r], 2)} -> {_pct(left.get(r), 2)}" for r in raw) or "-"


def dram_figures(m: Metrics) -> str:
    """DRAM saved per policy at the headline pool size and at the size each buys best, with 90% intervals."""
    if (gone := _missing(m, "simulate")) is not None:
        return gone
    s = m["simulate"]
    rows = []
    for name, p in s.get("policies", {}).items():
        h, r = p.get("at_headline", {}), p.get("recommended", {})
        rows.append((f"`{split_ratio(name)[0]}`" + (f" ({split_ratio(name)[1]})" if split_ratio(name)[1] else ""),
                     _pct(h.get("savings")) + _iv(h.get("savings_interval")),
                     _pct(h.get("savings_per_server_peaks")) + _iv(h.get("savings_per_server_peaks_interval")),
                     f"{p.get('recommended_pool_sockets')}" if p.get("recommended_pool_sockets") else "no pool",
                     _pct(r.get("savings")) + _iv(r.get("savings_interval")), _slowed(p)))
    iv = s.get("interval", {})
    out = [(f"{s.get('window')}; {s.get('servers')} servers in {s.get('clusters')} clusters; intervals: "
           f"{iv.get('level', 0):.0%}, {iv.get('draws')} draws resampling {iv.get('resampled')}. Memory-hours of the "
           f"window decided by a policy: {s.get('steady_state', {}).get('memory_hours_decided_pct')}%."), "",
           *table(("policy", f"saved, {s.get('headline_pool_sockets')} sockets",
                   "each server and pool at its own peak", "sockets it buys best", "saved there",
                   "mispredicted -> left slowed"), rows), ""]
    for ratio, a in s.get("answer", {}).items():
        tied = " and ".join(f"`{split_ratio(x)[0]}`" for x in a.get("undecided_between", []))
        verdict = "decided" if a.get("decided") else f"undecided between {tied}"
        reach = "" if a.get("placement_reach") is None else \
            f", the replay's own reach {100 * a['placement_reach']:.1f} points"
        out.append(f"- Sizing answer at {float(ratio):.0%}: `{split_ratio(a.get('policy', '-'))[0]}` on "
                   f"{a.get('pool_sockets')}-socket pools, {_pct(a.get('savings'))}{_iv(a.get('savings_interval'))} "
                   f"DRAM saved ({verdict}; difference with the runner-up{_iv(a.get('difference_interval'))}{reach}).")
    return "\n".join(out)


def read_static_savings(path: Path) -> Savings:
    """The fixed splits' rows of `simulate`'s savings plot (git-tracked beside the metrics): what every VM split the
    same way saves at each pool size, in both accountings; empty where the stage has not run."""
    if not path.is_file():
        return {}
    out: Savings = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            name = row.get("policy", "")
            if name.startswith("static_") and name.endswith("pct"):
                kept = row.get("kept_placement_pct")
                out.setdefault(int(name[len("static_"):-len("pct")]), {})[int(row["pool_sockets"])] = (
                    float(row["savings_pct"]), float(row["per_server_peaks_pct"]), *([float(kept)] if kept else []))
    return out


def premium(saved: tuple[float, ...], all_local: float) -> float:
    """What one local size per cluster costs a policy over its servers' and pools' own peaks, from its two savings
    (in %) and all local's premium: (1 - provider) = (1 - own peaks) (1 + premium) / (1 + all local's premium)."""
    provider, peaks = saved[:2]
    return (1 - provider / 100) / (1 - peaks / 100) * (1 + all_local) - 1


def _static_missing(m: Metrics, static: Savings) -> str | None:
    if (gone := _missing(m, "simulate")) is not None:
        return gone
    return None if static and "all_local_uniform_premium" in m["simulate"] else f"Not run: {SAVINGS} missing."


def premium_figures(m: Metrics, static: Savings) -> str:
    """The premium over the peaks by pool size for every fixed split, and what the largest pool recovers of it."""
    if (gone := _static_missing(m, static)) is not None:
        return gone
    base, top = m["simulate"]["all_local_uniform_premium"], max(static)
    sizes = sorted(static[top])
    rows = [(f"{share}% of every VM on the pool", *(_pct(premium(by[n], base)) for n in sizes if n in by))
            for share, by in sorted(static.items())]
    rows += [(f"{top}%: saved as a provider buys", *(f"{static[top][n][0]:+.1f}%" for n in sizes)),
             (f"{top}%: saved at each server's own peak (Fig. 3)", *(f"{static[top][n][1]:+.1f}%" for n in sizes))]
    big = sizes[-1]
    return "\n".join([
        (f"All local pays {_pct(base)} over its servers' own peaks: every server of a cluster buys what its fullest "
        "needs."), "", *table(("premium over the peaks, by pool size (sockets)", *map(str, sizes)), rows), "",
        (f"At {big} sockets, {top}% of every VM on the pool saves {static[top][big][0] - static[top][big][1]:+.1f} "
        f"points more as a provider buys than at each server's own peak: its premium is "
        f"{_pct(premium(static[top][big], base))}, all local's {_pct(base)}.")])


def static_open_figures(m: Metrics, static: Savings) -> str:
    """The checks that need no model, on the default run: one-server pools, the gap between the accountings."""
    if (gone := _static_missing(m, static)) is not None:
        return gone
    s, top = m["simulate"], max(static)
    shares = sorted(static)
    least = min(static[top])
    head = s.get("headline_pool_sockets", least)
    gaps = [v[0] - v[1] for n, v in static[top].items() if n >= head]
    kept = all(len(v) > 2 for by in static.values() for v in by.values())
    big = max(static[top])

    def at(n: int, i: int) -> str:
        return ", ".join(f"{static[x][n][i]:+.1f}" for x in shares if n in static[x])

    split = "/".join(map(str, shares))
    return "\n".join([
        (f"- Fixed splits on {least}-socket pools, the smallest replayed ({split}% of every VM) save {at(least, 0)}% "
        f"as a provider buys and {at(least, 1)}% at each server's own peak."),
        *(_rises(static, shares, i, label) for i, label in ((0, "As a provider buys"),
                                                           (1, "At each server's own peak"))),
        (f"- With {top}% on the pool, the provider's accounting runs {min(gaps):+.1f} to {max(gaps):+.1f} points above "
        f"the per-server peaks at {head}-{max(static[top])} sockets ({'within' if max(gaps) <= 3 else 'not within'} "
        "3): one local size per cluster makes all local dearer, and a pool recovers part of it."),
        *([(f"- On the trace's servers (Pond's accounting: every VM kept where production's packing put it), the same "
            f"splits save {at(least, 2)}% on {least}-socket pools, and {top}% saves {static[top][head][2]:+.1f}% at "
            f"{head} sockets and {static[top][big][2]:+.1f}% at {big}."),
            _rises(static, shares, 2, "On the trace's servers"),
            _pond_gap(static, shares)]
          if kept and head in static[top] else []),
        *([(f"- The sizing search's own noise: a scan of every whole GB finds all local {100 * gap:.2f}% less DRAM "
            "than the search (a first fit with a move budget is not monotone in its capacity). Each saving as a "
            "provider buys can move by about that with the search alone; those on the trace's servers do not.")]
          if (gap := s.get("all_local_search_gap")) is not None else []),
        *([("- The sizing search scans every whole GB up from what the VMs need at their peak (`simulate.search: "
           "scan`): each size is the least that holds, so a split on one-server pools costs what all local does, to "
           "the GB or two its shares round to, and no saving rests on where a search happened to stop.")]
          if s.get("search") == "scan" else []),
        _clusters(s)])


def _clusters(s: dict) -> str:
    """How far the draw's clusters are from production's, in figures."""
    c = s.get("cluster_scale")
    line = f"- Clusters are the draw's own: {s.get('servers')} servers in {s.get('clusters')} clusters"
    if not c:
        return line + "."
    return (f"{line} of {c['servers_min']}-{c['servers_max']} servers (median {c['servers_median']:g}); "
            f"{c['clusters_holding_largest_pool']} of them hold a whole pool of the largest size replayed "
            f"({c['largest_pool_servers']} servers), and a cluster creates about "
            f"{c['vms_created_per_cluster_day_median']:,.0f} VMs a day (median), where Pond's create thousands.")


def _pond_gap(static: Savings, shares: list) -> str:
    """Fig. 3 as a provider buys against Pond's accounting, every split at every pool size above the smallest."""
    gaps = {(x, n): v[0] - v[2] for x in shares for n, v in static[x].items() if n > min(static[x])}
    (x, n) = max(gaps, key=lambda k: abs(gaps[k]))
    lo, hi = min(gaps.values()), max(gaps.values())
    return (f"- As a provider buys, every split runs {lo:+.1f} to {hi:+.1f} points from Pond's accounting above the "
            f"smallest pool ({'within' if max(-lo, hi) <= 3 else 'not within'} 3; farthest: {x}% at {n} sockets).")


def _rises(static: Savings, shares: list, i: int, label: str) -> str:
    """Fig. 3's shape in one accounting (``i``: 0 the provider's, 1 the peaks', 2 the trace's servers'): with the pool, and with the share at
    every pool size above the smallest."""
    steps = [static[x][b][i] - static[x][a][i] for x in shares
             for a, b in itertools.pairwise(sorted(static[x]))]
    sizes = sorted(set.intersection(*(set(static[x]) for x in shares)))[1:]
    out_of_order = [n for n in sizes if any(static[x][n][i] >= static[y][n][i] for x, y in itertools.pairwise(shares))]
    pool = (f"each fixed split saves more as the pool grows (smallest step {min(steps):+.2f} points)"
            if min(steps) > 0 else f"a fixed split's saving falls by up to {-min(steps):.1f} points as the pool grows"
            if min(steps) < 0 else "no fixed split's saving falls as the pool grows (flat at a step or more)")
    share = ("more with a larger share at every pool size above the smallest" if not out_of_order else
             f"not always more with a larger share (at {', '.join(map(str, out_of_order))} sockets)")
    return f"- {label}, {pool}, and {share}."


def fleet_monitor(m: Metrics) -> str:
    """The QoS monitor's recall on the fleet over the backtest's nights, and the budget it kept."""
    if (gone := _missing(m, "backtest")) is not None:
        return gone
    b = m["backtest"]
    if b.get("monitor_slowed_calls") is None:
        return "Not in metrics/backtest.json (a backtest from before the monitor's recall was counted): rerun it."
    return (f"- Over {b.get('nights')} nights the monitor flagged **{b['monitor_slowed_calls_flagged']} of the "
            f"{b['monitor_slowed_calls']}** slowed insensitive calls ({_pct(b.get('monitor_recall'))}), and at least "
            f"80% of them on {b.get('nights_monitor_recall_at_least_80pct')} of the "
            f"{b.get('nights_with_slowed_calls')} nights that had any.\n"
            f"- The budget held on {b.get('nights_within_budget')} of the nights after the monitor "
            f"({b.get('nights_within_budget_raw')} before it), with at most {_pct(b.get('mitigations_max'), 2)} of a "
            f"day's VMs mitigated.")


def in_short(m: Metrics) -> str:
    """What the night means for the scheduler, in a paragraph: the policy served, what it puts on the pool the next
    day, what the replay says it saves and whether that beats the runner-up."""
    if (gone := _missing(m, "evaluate", "simulate")) is not None:
        return gone
    e, s = m["evaluate"], m["simulate"]
    served = e.get("served", {})
    out = [(f"Tonight the service applies `{e.get('served_policy')}`. On the next day ({e.get('day')}) it put "
           f"{_pct(served.get('pool_share'))} of the memory on the pool; "
           f"{_pct(served.get('mispredictions_conservative'), 2)} of the VMs were mispredicted, and after the QoS "
           f"monitor moved {_pct(served.get('mitigations'), 2)} of the VMs "
           f"back to local memory, {_pct(served.get('mispredictions_unmitigated'), 2)} were left slowed past the PDM "
           f"(budget {_pct(e.get('budget'), 0)}).")]
    for ratio, a in s.get("answer", {}).items():
        own = f"the solver's own rule (Pond's Eq. 1; {a.get('fallback', 'the cap that saves most')})"
        tied = " and ".join(f"`{split_ratio(x)[0]}`" for x in a.get("undecided_between", []))
        moved, diff = a.get("placement_reach"), _iv(a.get("difference_interval")).strip()
        if a.get("decided"):
            verdict = (f"it beats the runner-up `{split_ratio(a.get('runner_up', '-'))[0]}` beyond their paired "
                       "interval" + ("" if moved is None else f" and the replay's own reach ({100 * moved:.1f} points)"))
        elif moved is None:
            verdict = f"the interval cannot separate {tied} (difference {diff} points), so the answer is {own}"
        else:
            verdict = (f"{tied} differ by {diff} points over clusters, within the replay's own reach "
                       f"({100 * moved:.1f} points: leaving out a few VMs moves it that far), so the answer is {own}")
        name = split_ratio(a.get("policy", "-"))[0]
        out.append(f"At {float(ratio):.0%} latency the replay's sizing answer is `{name}` on {a.get('pool_sockets')}"
                   f"-socket pools: {_pct(a.get('savings'))}{_iv(a.get('savings_interval'))} of DRAM saved against "
                   f"all local; {verdict}.")
    return " ".join(out)


PAGES = {"li": li_figures, "um": um_figures, "budget": budget_figures, "dram": dram_figures}


def marks(page: str) -> tuple[str, str]:
    """The markers between which ``pond docs`` writes a results page's figures."""
    return f"<!-- results {page}: begin (pond docs, from metrics/) -->", f"<!-- results {page}: end -->"


def rendered_pages(root: Path, m: Metrics) -> dict[Path, str]:
    """Every page (relative to ``root``) with the figures of the default run that it quotes rendered from ``m``:
    `pond report`'s table in the README and docs/tonight.md, the monitor's figures, each results page's."""
    report_text = "```\n" + to_text(headline(m), closing(m)) + "\n```"
    out = {page: between((root / page).read_text(), REPORT_BEGIN, REPORT_END, report_text, str(page),
                         "`pond report`'s table") for page in (README, TONIGHT)}
    out[MONITOR] = between((root / MONITOR).read_text(), MONITOR_BEGIN, MONITOR_END,
                           monitor_table(m.get("train_monitor", {})), str(MONITOR), "the monitor's figures")
    out[TONIGHT] = between(out[TONIGHT], *marks("in short"), in_short(m), str(TONIGHT), "the night in short")
    out[MONITOR] = between(out[MONITOR], *marks("fleet monitor"), fleet_monitor(m), str(MONITOR),
                           "the monitor's recall on the fleet")
    out[MONITOR] = between(out[MONITOR], *marks("monitor verdict"), monitor_verdict(m.get("train_monitor", {})),
                           str(MONITOR), "what the monitor's figures say")
    for name, figures in PAGES.items():
        path = RESULTS / f"{name}.md"
        out[path] = between((root / path).read_text(), *marks(name), figures(m), str(path), "the page's figures")
    static, dram = read_static_savings(root / SAVINGS), RESULTS / "dram.md"
    out[dram] = between(out[dram], *marks("dram premium"), premium_figures(m, static), str(dram), "the premium")
    out[dram] = between(out[dram], *marks("dram open"), static_open_figures(m, static), str(dram), "the open checks")
    return out
