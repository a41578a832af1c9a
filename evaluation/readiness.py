"""Which commands a directory of telemetry can feed, before any stage runs (`pond validate`, `pond import`).

Each contract table is read and checked on its own (so one bad table does not hide the state of
the others), then the references between the valid ones. The needs below are what the stages read
from ``data/raw`` (their ``read_tables`` calls and ``features.tma.require_events``).
"""

from __future__ import annotations

import pandas as pd

from pond.core.errors import ContractError
from pond.core.params import Params
from pond.features.tma import require_events
from pond.models.li import full_pool_slowdown
from pond.models.um_protocol import usable_nights
from pond.optimize.evidence import measured_before_created
from pond.telemetry.contract import OPTIONAL_TABLES, TABLES, validate_table, validate_tables
from pond.telemetry.io import find_table, read_raw
from pond.telemetry.storage import Location, location

REPRO = "dvc repro (the nightly pipeline: features, train_li, train_monitor, train_um, optimize, evaluate, backtest, simulate, register)"
STATIC = "pond simulate --static-only (DRAM with static pools, no models)"
# What each command reads from the tables. ``LABELLED``: vms with an untouched_fraction on some VM (train_um's
# label; calibrate's Fig. 6 checks); `pond calibrate` reads the features stage's output, which needs all four.
LABELLED = "vms+labels"
NEEDS: dict[str, tuple[str, ...]] = {
    REPRO: ("workloads", "slowdowns", LABELLED, "vm_counters"),
    "pond calibrate": ("workloads", "slowdowns", LABELLED, "vm_counters"),
    STATIC: ("vms",),
}
HOW = {
    "workloads": "the lab's workloads with their PMU event counts (perf stat; `pond import --perf-dir`)",
    "slowdowns": "the lab's slowdown per workload, latency ratio and spilled share",
    "vms": "one row per VM of the fleet (an Azure V2 vmtable: `pond import --azure-vmtable`)",
    "vm_counters": "each VM's PMU event counts over its first hour",
    "vm_slowdowns": "optional: slowdowns measured on fleet VMs (A/B tests), evidence for the LI error rate",
    "spill_counters": "optional: the lab's PMU counts of its runs with memory on the pool (perf stat; `pond import "
                      "--perf-dir` with latency_ratio and spilled_pct in --perf-meta), the QoS monitor's model's input",
    "vm_pool_counters": "optional: PMU counts of fleet VMs counted while memory was on a pool (the hypervisor's; "
                        "`pond import --perf-dir --perf-vm-meta`), what the replay's QoS monitor scores",
}


def _ready(vms: pd.DataFrame, days: set, as_of: pd.Timestamp, params: Params) -> bool:
    """``as_of`` can be a night: VMs created the day after it, and a UM backtest night to train on before it
    (`backtest` replays the nights of ``backtest.nights`` that have one: at least this one)."""
    return as_of + pd.Timedelta(days=1) in days and usable_nights(vms, as_of, params.train_um) > 0


def supported_nights(vms: pd.DataFrame, params: Params) -> int:
    """How many of the ``backtest.nights`` ending ``base.as_of`` have telemetry enough before them to train on:
    the ones `backtest` replays (the first nights of a short trace have none)."""
    as_of = pd.Timestamp(params.base.as_of)
    return sum(usable_nights(vms, as_of - pd.Timedelta(days=k), params.train_um) > 0
               for k in range(params.backtest.nights))


def _creation_days(vms: pd.DataFrame) -> pd.DatetimeIndex:
    """The days VMs were created on (naive midnights), from the distinct days, not one object per VM."""
    created = pd.DatetimeIndex(vms["created_at"].dt.normalize().unique())
    return created.tz_localize(None) if created.tz is not None else created


def timeline(vms: pd.DataFrame, params: Params) -> list[str]:
    """Why ``base.as_of`` cannot be tonight's night on this trace (empty when it can), with the days
    that would do: `evaluate` scores the VMs created the day after it, and every `backtest` night
    needs a UM backtest night with VMs to train, calibrate and score (``models.um_protocol``)."""
    as_of = pd.Timestamp(params.base.as_of)
    created = _creation_days(vms)
    if _ready(vms, days := set(created), as_of, params):
        return []
    start, end = created.min(), created.max()
    first = next((d for d in pd.date_range(start, end - pd.Timedelta(days=1)) if _ready(vms, days, d, params)), None)
    last = next((d for d in pd.date_range(end - pd.Timedelta(days=1), start, freq="-1D")
                 if _ready(vms, days, d, params)), None) if first is not None else None
    trace = f"the trace's VMs were created from {start.date()} to {end.date()}"
    if first is None:
        return [(f"base.as_of {as_of.date()} cannot be a night on this trace ({trace}), nor can any other day with "
                f"these params: a night needs VMs that ended within train_um.train_days "
                f"({params.train_um.train_days}) and train_um.calib_days before it, and VMs created the next day. "
                "Fix: a longer trace, or lower train_um.calib_lag_days / calib_days")]
    return [(f"base.as_of {as_of.date()} cannot be a night on this trace ({trace}). Fix: set base.as_of in "
            f"params.yaml to a day from {first.date()} to {last.date()}")]


def _reports_left_out(reports: pd.DataFrame, vms: pd.DataFrame) -> str:
    """The rows of ``vm_slowdowns`` no stage will use as a VM's evidence, said before a stage skips them."""
    unknown = int((~reports.vm_id.isin(vms.vm_id)).sum())
    early = int(measured_before_created(reports, vms.set_index("vm_id").created_at).sum())
    parts = [f"{unknown:,} of VMs the vms table does not hold"] * bool(unknown) + \
        [f"{early:,} measured before their VM was created (a reused id or a wrong clock)"] * bool(early)
    return f"; left out: {', '.join(parts)}" if parts else ""


def check(directory: Location, params: Params | None = None) -> tuple[dict[str, str], dict[str, list[str]]]:
    """(state per table: ok / missing / the error, problems per command: empty when it can run).
    With ``params``, also whether ``base.as_of`` fits the trace's days."""
    state: dict[str, str] = {}
    valid: dict[str, pd.DataFrame] = {}
    for table in (*TABLES, *OPTIONAL_TABLES):
        try:
            path = find_table(location(directory), table)
            if path is None:
                state[table] = "missing" if table in TABLES else f"absent ({HOW[table]})"
                continue
            df = validate_table(read_raw(path, table), table)
            if table in ("workloads", "vm_counters"):
                require_events(df, table)
            valid[table] = df
            state[table] = f"ok ({len(df):,} rows, {path.name})"
        except ContractError as exc:
            state[table] = f"invalid: {exc}"
    try:
        validate_tables(valid)
    except ContractError as exc:
        state[exc.table] = f"invalid: {exc}"
        valid.pop(exc.table, None)
    if "vms" in valid and "vm_slowdowns" in valid:
        state["vm_slowdowns"] += _reports_left_out(valid["vm_slowdowns"], valid["vms"])
    if "vms" in valid and valid["vms"]["untouched_fraction"].notna().sum() == 0:
        state["vms"] += "; no VM has untouched_fraction (train_um has no label)"
    problems = {cmd: [why for why in (_lacks(t, state, valid) for t in needs) if why] for cmd, needs in NEEDS.items()}
    problems[REPRO] += [f"{t} is not usable (the nightly job reads it where it exists; fix it or remove it): "
                        f"{state[t].removeprefix('invalid: ')}" for t in OPTIONAL_TABLES if state[t].startswith("invalid")]
    if params is not None and not _lacks(LABELLED, state, valid):
        late = timeline(valid["vms"], params)
        problems[REPRO] += late
        n, asked = (0, 0) if late else (supported_nights(valid["vms"], params), params.backtest.nights)
        if n < asked:
            state["vms"] += (f"; {n} of the {asked} backtest nights ending base.as_of have telemetry enough before "
                             f"them to train on: `backtest` replays those {n}")
    if params is not None and "slowdowns" in valid:
        problems[REPRO] += lab_labels(valid["slowdowns"], params.train_li.latency_ratios)
    return state, problems


def _lacks(need: str, state: dict[str, str], valid: dict[str, pd.DataFrame]) -> str:
    """Why the tables do not meet ``need`` (a table, or ``LABELLED``), with the table's own problem; empty when
    they do."""
    table = "vms" if need == LABELLED else need
    if table not in valid:
        if state[table] == "missing":
            return f"{table} is missing: {HOW[table]}"
        return f"{table} is not usable: {state[table].removeprefix('invalid: ')}"
    if need == LABELLED and valid["vms"]["untouched_fraction"].notna().sum() == 0:
        return ("vms has no untouched_fraction on any VM: train_um learns it from ended VMs (an Azure vmtable has "
                "none; export it from the guest or hypervisor, docs/design.md)")
    return ""


def lab_labels(slowdowns: pd.DataFrame, ratios: tuple[float, ...]) -> list[str]:
    """What keeps train_li from labelling the lab at each ratio it trains (full-pool runs), found now
    rather than after the features stage."""
    problems = []
    for ratio in ratios:
        try:
            full_pool_slowdown(slowdowns, ratio)
        except ContractError as exc:
            problems.append(f"train_li.latency_ratios {ratio:g}: {exc}")
    return problems


def report(state: dict[str, str], problems: dict[str, list[str]]) -> str:
    width = max(map(len, state))
    lines = ["tables:"] + [f"  {t:{width}s} {s}" for t, s in state.items()] + ["commands:"]
    for cmd, missing in problems.items():
        lines.append(f"  {'ready  ' if not missing else 'BLOCKED'} {cmd}")
        lines += [f"            - {m}" for m in missing]
    return "\n".join(lines)
