"""params.yaml as code: one validated section per stage, and the whole file.

Each stage reads its own section (``FeatureParams`` for `features`, ``UmParams`` for `train_um`,
...), and the fields below hold the only defaults in the code; the committed params.yaml states
the same values (a test keeps them equal), so DVC tracks every value a stage uses. ``load``
validates the whole file before a stage runs: an unknown key, a value out of range or two
sections that disagree stop the night with a ``ConfigError`` that names the key, instead of
running with a default or a silently empty feature. ``base.seed`` and ``base.as_of`` are written
once and handed to the sections that use them; the file may not set them there.

This module sits under every package (it imports none of them), so any stage may take its section.
"""

from __future__ import annotations

import warnings
from datetime import date
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import pandas as pd
import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from pond.core.days import end_of
from pond.core.errors import ConfigError


def _iso_day(value: str | date) -> str:
    try:
        return date.fromisoformat(str(value)).isoformat()
    except ValueError:
        raise ValueError("not a date; write it as YYYY-MM-DD") from None


Day = Annotated[str | date, AfterValidator(_iso_day)]   # an ISO date, kept as its YYYY-MM-DD text


def explain(exc: ValidationError, where: str, source: str = "params.yaml",
            fix: str = "correct these keys in params.yaml") -> str:
    """The problems (at most five), each naming its key."""
    parts = []
    for e in exc.errors()[:5]:
        key = ".".join(str(x) for x in (where, *e["loc"]) if str(x))
        msg = e["msg"].removeprefix("Value error, ")
        shown = e["type"] != "missing" and not isinstance(e["input"], dict)
        parts.append((f"{key}: " if key else "") + msg + (f" (got {repr(e['input'])[:80]})" if shown else ""))
    more = f"; and {len(exc.errors()) - 5} more" if len(exc.errors()) > 5 else ""
    return f"{source} " + "; ".join(parts) + more + f". Fix: {fix}"


class Section(BaseModel):
    """A params.yaml section: frozen, unknown keys refused, errors raised as ConfigError."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    section: ClassVar[str] = ""

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise ConfigError(explain(exc, self.section)) from None


def percentile_columns(percentiles: tuple[int, ...] | list[int]) -> list[str]:
    """The customer-history columns: ``cust_n`` (ended VMs in the window), then one per percentile."""
    return ["cust_n"] + [f"cust_p{p}" for p in percentiles]


class LabParams(Section):
    """params.yaml ``generate.lab`` (``seed`` comes from ``base.seed``)."""

    section = "generate.lab"
    seed: int = Field(0, description="set by base.seed")
    population: int = Field(1000, ge=158,
                            description="workload behaviours the fleet's VMs run; the lab measures 158 of them")
    latency_ratios: tuple[float, ...] = Field((1.82, 2.22), min_length=1,
                                              description="pool/local latency ratios the lab measures slowdowns at")
    spill_levels: tuple[float, ...] = Field((0, 10, 25, 50, 75, 100), min_length=2,
                                            description="% of a workload's footprint placed on the pool in lab runs")
    repetitions: int = Field(3, ge=1, description="lab runs per workload, ratio and spill level")
    noise_pp: float = Field(0.3, ge=0, description="run-to-run slowdown noise, absolute percentage points")
    noise_rel: float = Field(0.04, ge=0, description="run-to-run slowdown noise, relative to the slowdown")
    counter_noise: float = Field(0.15, ge=0,
        description="relative noise of lab counters (runs multiplex ~200 events over 33 groups)")


class FleetParams(Section):
    """params.yaml ``generate.fleet`` (``seed`` comes from ``base.seed``)."""

    section = "generate.fleet"
    seed: int = Field(0, description="set by base.seed")
    start: Day = Field("2026-01-01", description="first day of the trace")
    n_days: int = Field(35, ge=1, description="days of VM creations")
    burn_in_days: int = Field(0, ge=0, description=(
        "days the fleet runs before its first day: the trace keeps the VMs still alive then (created before it), so "
        "it opens with the fleet's long-lived VMs in place, as a real trace does; 0: it opens empty"))
    vms_per_day: float = Field(16000.0, gt=0, description=(
        "mean VM creations per day; 16,000 makes every cluster of the built-in fleet hold a whole 64-socket pool"))
    n_customers: int = Field(1500, ge=1, description="customers established at the start")
    new_customers_per_day: float = Field(6.0, ge=0, description="customers arriving per day")
    n_regions: int = Field(4, ge=1, description="regions")
    clusters_per_region: int = Field(3, ge=1, description="clusters per region")
    deployments_per_customer: float = Field(4.0, gt=0, description=(
        "mean deployments a customer owns over the whole trace: at 35 days and 16,000 VMs a day about 80 VMs each, as "
        "in Azure's 2019 trace; a longer trace at the same rate makes them larger unless this grows with n_days"))
    deployment_days: float = Field(3.0, gt=0, description="mean active span of a deployment, days")
    windows_share: float = Field(0.3, ge=0, le=1, description="share of VMs running Windows")
    untouched_logit_sd: float = Field(1.1, ge=0, description="spread of customers' latent untouched level (logit)")
    drift_per_day: float = Field(0.02, ge=0, description="sd of customers' linear drift of that level (logit per day)")
    counter_coverage: float = Field(0.97, ge=0, le=1,
                                    description="share of VMs whose first-hour counters were collected")
    counter_noise: float = Field(0.10, ge=0, description="relative noise of VM counters")
    internal_share: float = Field(0.0, ge=0, le=1,
        description="share of customers whose VMs report a slowdown entirely on pool (vm_slowdowns); 0: none")
    shape: Literal["footprint", "azure"] = Field("azure", description=(
        "VM sizes and lifetimes: azure (the public 2019 trace's vCPU, memory and lifetime mix, docs/calibration.md; a "
        "workload runs an instance scaled to its VM) or footprint (each VM holds its workload's whole footprint; "
        "4h median life; the older default)"))


class FeatureParams(Section):
    """params.yaml ``features`` (``as_of`` comes from ``base.as_of``)."""

    section = "features"
    as_of: Day = Field(description="set by base.as_of: last day of data the snapshot may use")
    window_days: int = Field(7, ge=1, description="days of ended VMs behind a customer's untouched percentiles")
    percentiles: tuple[int, ...] = Field((50, 80, 90, 95, 99),
                                         description="customer untouched percentiles: the UM model's inputs cust_p<q>")
    history_days: int = Field(28, ge=1, description="days of first-hour counters behind a workload history")
    counter_delay_s: int = Field(3600, ge=0,
        description="counters cover a VM's first this many seconds; history uses them only after")
    min_history_vms: int = Field(1, ge=1,
                                 description="VMs a (customer, VM type, region) needs to have a workload history")
    request_shapes: int = Field(50_000, ge=1,
        description="distinct recent requests the service predicts when it loads (its UM cache)")

    @field_validator("percentiles")
    @classmethod
    def _percentiles(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if not v or not all(0 < q < 100 for q in v) or list(v) != sorted(set(v)):
            raise ValueError("must be distinct whole percentiles in (0, 100), in increasing order")
        return v

    @property
    def customer_columns(self) -> list[str]:
        """The customer-history columns these percentiles give (the UM model's customer inputs)."""
        return percentile_columns(self.percentiles)

    @property
    def snapshot_time(self) -> pd.Timestamp:
        """Midnight after the as-of day: what the service holds while serving the next day."""
        return end_of(self.as_of)


class LiParams(Section):
    """params.yaml ``train_li``: one forest per (latency ratio, PDM), curves from random halves."""

    section = "train_li"
    latency_ratios: tuple[float, ...] = Field((1.82, 2.22), min_length=1, description="one LI model per latency ratio")
    pdms: tuple[float, ...] = Field((5.0,), min_length=1,
                                    description="and per performance degradation margin (% slowdown)")
    n_splits: int = Field(100, ge=2,
                          description="random 50/50 splits of the lab's workloads behind the held-out curves")
    fp_targets_pct: tuple[float, ...] = Field((1.0, 2.0, 5.0),
                                              description="FP levels (% of workloads) the metrics report LI at")
    band_level: float = Field(0.99, gt=0, lt=1,
                              description="confidence level of the t-interval of the mean over splits")
    select_fp_pct: float = Field(2.0, gt=0, lt=100,
        description="the operating FP at which the forest and the single-counter rules compete")
    select_band: tuple[float, float] = Field(
        (0.5, 2.5), description="the candidates compete on their LI averaged over FP from select_fp_pct x the first "
                                "to x the second (1-5% at 2%): one FP point on ~80 workloads moves by whole workloads")
    select_splits: int = Field(20, ge=2, description="outer halves that judge the selection procedure (nested CV)")
    cv_folds: int = Field(5, ge=2, description="inner folds, workloads as groups")
    oof_repeats: int = Field(3, ge=1, description="out-of-fold scores averaged: the solver's FP counts")

    @model_validator(mode="after")
    def _band(self) -> LiParams:
        lo, hi = self.select_band
        if not (0 < lo <= 1 <= hi and hi * self.select_fp_pct < 100):
            raise ValueError("select_band must be [lo, hi] with 0 < lo <= 1 <= hi and hi x select_fp_pct < 100")
        return self


# The QoS monitor's default counters: 12 memory events, chosen before looking at any result for the ways a pool slows
# a workload (demand misses that wait longer, occupancy, prefetches, page walks, remote DRAM traffic, bandwidth).
MONITOR_EVENTS: tuple[str, ...] = (
    "CPU_CLK_UNHALTED.THREAD", "INST_RETIRED.ANY", "CYCLE_ACTIVITY.STALLS_L3_MISS", "CYCLE_ACTIVITY.STALLS_MEM_ANY",
    "OFFCORE_REQUESTS.L3_MISS_DEMAND_DATA_RD", "OFFCORE_REQUESTS_OUTSTANDING.L3_MISS_DEMAND_DATA_RD",
    "OFFCORE_REQUESTS_OUTSTANDING.CYCLES_WITH_L3_MISS_DEMAND_DATA_RD", "MEM_LOAD_L3_MISS_RETIRED.LOCAL_DRAM",
    "MEM_LOAD_L3_MISS_RETIRED.REMOTE_DRAM", "DTLB_LOAD_MISSES.WALK_ACTIVE", "L2_RQSTS.ALL_PF", "UNC_M_CAS_COUNT.RD")


class MonitorParams(Section):
    """params.yaml ``train_monitor``: the QoS monitor's model, from the lab's spill runs (``spill_counters``)."""

    section = "train_monitor"
    pdm: float = Field(5.0, gt=0, description="a run is slowed when its measured slowdown exceeds this (%)")
    latency_ratios: tuple[float, ...] = Field((1.82, 2.22), min_length=1,
                                              description="the pool latencies judged and served a threshold")
    max_false_alarm: float = Field(0.05, ge=0, lt=1,
        description="flag threshold: at most this share of the runs within the PDM flagged")
    fa_confidence: float | None = Field(0.9, gt=0, lt=1, description=(
        "... at this one-sided confidence (Clopper-Pearson on the training runs), so that the rate holds on other "
        "workloads; null: at the rate itself"))
    folds: int = Field(5, ge=2, description="outer folds, workloads as groups: every run judged by a model "
                                            "that never saw its workload")
    inner_folds: int = Field(3, ge=2, description="folds of the training workloads that set each threshold")
    call_level: float | None = Field(None, ge=0, le=1, description=(
        "a VM all on the pool (an insensitive call) is flagged at a threshold set, by the same rule, on the lab's "
        "runs all on the pool of the workloads an LI model that never saw them calls at this P(insensitive) or "
        "above; null: at the threshold set on every spill run (on the built-in draws the called workloads' "
        "threshold rose on 4 of 7 and no acceptance target gained)"))
    stall_rule: bool = Field(True, description=(
        "score a VM by the larger of the forest's P(exceeds) and a logistic fit on the stall cycles the pool's extra "
        "latency explains (DRAM-bound stalls and page walks, times the remote share of the misses and (r-1)/r): the "
        "forest alone missed the fleet's VMs slowed by page walks served by the pool, a mechanism few lab "
        "workloads show"))
    events: tuple[str, ...] | None = Field(MONITOR_EVENTS, min_length=1, description=(
        "the PMU events the monitor reads while a VM runs (each one's rate per cycle, the TMA metrics they give, "
        "the allocation): the hypervisor counts these and `POST /v1/qos` needs only these; those the lab does not "
        "count are left out; null: every event the lab counts"))


class UmParams(Section):
    """params.yaml ``train_um``."""

    section = "train_um"
    target_op: float = Field(0.04, gt=0, lt=1,
        description="overprediction target the metrics report (Pond's production target: 4% of VMs)")
    train_days: int = Field(21, ge=1, description="days of ended VMs a nightly UM model trains on")
    calib_days: int = Field(3, ge=1, description="days held out for split-conformal calibration")
    calib_lag_days: int = Field(4, ge=0, description="lag of the calibration days, so that long-lived VMs have ended")
    curve_lag_days: int | None = Field(0, ge=0, description=(
        "days before base.as_of the solver's OP curve scores its last next day (on the outcomes known by the end "
        "of as_of); null: calib_lag_days"))
    backtest_nights: int = Field(14, ge=1,
                                 description="rolling nights before base.as_of whose outcomes the solver reads")
    alphas: tuple[float, ...] = Field((0.002, 0.005, 0.01, 0.02, 0.04, 0.07, 0.1, 0.15, 0.2, 0.3), min_length=1,
                                      description="quantiles trained for the trade-off curve")
    target_grid: tuple[float, ...] = Field((0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.045, 0.05, 0.055,
                                            0.06, 0.065, 0.07, 0.075, 0.08, 0.09, 0.1, 0.125, 0.15, 0.2, 0.3),
                                           min_length=1, description="OP targets the solver may choose (shares of VMs)")

    @model_validator(mode="after")
    def _consistent(self) -> UmParams:
        if self.calib_days + self.calib_lag_days >= self.train_days:
            raise ValueError("calib_days + calib_lag_days must be < train_days (the window holds both)")
        if not all(0 < x < 1 for x in (*self.alphas, *self.target_grid)):
            raise ValueError("alphas and target_grid are shares of VMs: each must lie in (0, 1)")
        return self


class OptimizeParams(Section):
    """params.yaml ``optimize``: the policy's targets (Pond Eq. 1) and how sure the solver must be."""

    section = "optimize"
    pdm: float = Field(5.0, gt=0, description="performance degradation margin, % slowdown")
    tp: float = Field(98.0, gt=0, le=100, description="at least tp % of VMs within the PDM (100 - tp: the budget)")
    latency_ratio: float = Field(1.82, ge=1, description="pool/local latency the policy is for")
    confidence: float | None = Field(0.95, gt=0, lt=1,
        description="quantile of tonight's mispredictions that must be within the budget; null = the mean")
    samples: int = Field(4000, ge=100, description="joint draws (lab error rate x tonight's OP) behind that quantile")
    recent_days: int = Field(7, ge=1, description="days of VMs up to as_of whose LI scores stand for the next day's")
    use_reports: bool = Field(True,
        description="count the fleet's measured slowdowns (vm_slowdowns, where the data set has it) beside the lab's")
    report_days: int = Field(28, ge=1,
        description="days of VM creations up to as_of whose measured slowdowns count as evidence of the LI error rate")
    use_monitor: bool = Field(True, description=(
        "count what the QoS monitor flagged among the recent_days' VMs (their counters under the pool by the monitor "
        "model where the data allow, else their own counters at qos.threshold) as evidence of the LI error rate: it "
        "can only raise the rate the solver charges (optimize.monitor)"))
    lab_floor: bool = Field(True, description=(
        "the LI error rate charged per threshold is never below the lab's counts: the fleet's evidence can only "
        "raise it. false: where the monitor model watched recent VMs called at a threshold, their flags divided by "
        "the monitor's recall stand in place of the lab's counts (an experiment: it trusts the monitor's recall on "
        "the fleet; docs/results/budget.md)"))
    credit_mitigation: bool = Field(True, description=(
        "bound what the QoS monitor leaves slowed: the zNUMA overpredictions it mitigates within "
        "qos.max_mitigated_share are not charged (optimize.solver). false: charge them too (on the footprint shape "
        "the credit pools more and saves less DRAM; docs/changelog.md)"))
    credit_caught_calls: bool = Field(True, description=(
        "with credit_mitigation and the monitor model on counters under the pool: the monitor's capacity is shared by "
        "all it flags, and an LI error it catches and mitigates is not charged (at most its held-out recall among "
        "the lab's LI errors at the threshold (recall_errors), lower bound at confidence, and at most the recent "
        "days' flags among the calls), so the solver may call more VMs "
        "insensitive or pick a larger UM target (optimize.solver)"))
    recall_errors: int = Field(5, ge=0, description=(
        "the monitor's recall that its flags among the LI calls are divided by (their error rate) and that "
        "credit_caught_calls credits: 0, over every lab run past the PDM (the credit: among the lab's LI errors "
        "called at the threshold); N, per LI threshold, among the lab's LI errors called at it, at least the N the LI "
        "model came nearest to calling (errors near a threshold are borderline on the pool, where the monitor "
        "misses most; optimize.monitor.nearest_counts)"))
    discount_false_alarms: bool = Field(False, description=(
        "with the monitor model: take its held-out false-alarm rate among the lab's workloads within the PDM that the "
        "LI model calls at each threshold (their posterior mean: an estimate, not a bound) off the flag rate "
        "before dividing by its recall, so that flags on VMs within the PDM are not charged as LI errors "
        "(optimize.monitor.over_recall; an experiment: on seed 43 it broke the budget, docs/monitor.md). false: "
        "every flag counts as an error"))
    serve: Literal["answer", "combined", "li_only", "um_only", "all_local"] = Field("answer",
        description="the policy the service applies: answer (simulate's sizing answer at the policy's latency ratio, "
                    "with its pool cap; all local where it buys no pool; the solver's combined rule where simulate "
                    "gave none), or by hand Pond's combined rule, its LI-only / UM-only alternative (each solved "
                    "within the same budget) or all local (nothing on a pool)")
    pool_cap: Annotated[float, Field(gt=0, le=1)] | None = Field(None,
        description="no VM served more than this share on the pool (a VM called insensitive gets exactly it); "
                    "null: no cap; with serve: answer, the answer's cap is used instead")

    @property
    def budget(self) -> float:
        """The share of VMs that may be mispredicted on a night: 1 - TP."""
        return (100.0 - self.tp) / 100.0


class SimParams(Section):
    """params.yaml ``simulate``."""

    section = "simulate"
    pool_sockets: tuple[int, ...] = Field((2, 4, 8, 16, 32, 64), min_length=1,
                                          description="pool sizes replayed, sockets per pool")
    socket_vcpus: float = Field(48.0, gt=0,
        description="vCPUs per socket of first-fit servers when the trace names none (Pond's Intel socket)")
    socket_memory_gb: float = Field(384.0, gt=0, description="GB of DRAM per socket of those servers")
    sockets_per_server: int = Field(2, ge=1, description="sockets per server")
    placement: Literal["pool_aware", "keep"] = Field("pool_aware", description=(
        "a trace that names no server: pool_aware (each policy placed afresh by a first fit that knows its "
        "split) or keep (the all-local first fit's servers kept under every policy, as a trace's own; a VM "
        "that no longer fits moves)"))
    packing: Literal["first_fit", "best_fit"] = Field("best_fit", description=(
        "the scheduler that places a trace that names no server, all local: first_fit (the lowest-numbered server "
        "that holds the VM) or best_fit (the one its vCPUs leave the fewest free on: production's packing); also "
        "calibrate's servers for Fig. 2a and Fig. 3"))
    search: Literal["scan", "steps"] = Field("scan", description=(
        "how the pool-aware replay finds the least local DRAM per server and GB per pool that hold: scan (every "
        "whole GB up from what the VMs need at their peak: the least, exactly, so a split on one-server pools costs "
        "what all local does) or steps (2% steps, then a bisection: about a third of the replays, and a capacity "
        "that holds, not always the least: all_local_search_gap says how far)"))
    static_fractions: tuple[float, ...] = Field((0.1, 0.15, 0.3, 0.5),
                                                description="static pool shares replayed (15%: Fig. 21's strawman)")
    static_whole_gb: bool = Field(False, description=(
        "false: a static pool takes exactly its share of every VM, as Pond's Fig. 3 does (a split on one-server "
        "pools is then the same DRAM labelled twice); true: each VM's part rounded down to whole GB, as the "
        "service sizes zNUMA nodes (2 and 4 GB VMs get none at 10-15%)"))
    pool_caps: tuple[Annotated[float, Field(gt=0, le=1)], ...] = Field((0.1, 0.15, 0.2, 0.3),
        description="the nightly combined policy replayed again with no VM over this share on the pool, per cap")
    fallback_cap: Annotated[float, Field(gt=0, le=1)] | None = Field(0.3, description=(
        "an undecided sizing answer falls back to Pond's combined rule at this cap unless another cap beats it "
        "beyond their interval and the replay's own reach; null, or a cap not in pool_caps or over the budget: the "
        "cap whose point estimate saves most, which moves with the draw (the answer's fallback says which)"))
    dram_cost_share: float = Field(0.5, gt=0, le=1, description="DRAM's share of server cost (docs/calibration.md)")
    latency_ratios: tuple[float, ...] = Field((1.82, 2.22), min_length=1,
                                              description="one nightly policy per pool latency, each sized")
    max_move_rate: float = Field(0.001, ge=0, le=1, description="VMs a sized cluster may move, share of the window's")
    warmup_days: int = Field(7, ge=0, description="--static-only: days replayed before the measured window, "
                             "from the first day of the trace's arrivals (not its oldest VM)")
    policy_warmup_days: int = Field(7, ge=0,
        description="nightly: days of the window whose decided VMs fill servers before DRAM is measured")
    recommend_tolerance: float = Field(0.005, ge=0,
        description="recommended pool: the smallest within this share of the best saving")
    interval: float = Field(0.9, gt=0, lt=1, description="the central share of cluster draws a DRAM-saved "
                            "figure's interval spans (simulator.intervals)")
    interval_draws: int = Field(2000, ge=100, description="cluster draws (with replacement) behind each interval; "
                                "seeded by base.seed")
    reach_share: float = Field(0.01, ge=0, lt=1, description=(
        "the sizing answer's verdict: each draw leaves out this share of the VMs and sizes the pair again; decided "
        "only beyond the largest change of their difference (simulator.placement_reach)"))
    reach_draws: int = Field(3, ge=0, description="draws behind that reach, seeded by base.seed; 0: the interval over "
                             "clusters alone decides")
    buy_days: Annotated[int, Field(ge=0)] | Literal["auto"] = Field("auto", description=(
        "days at the start of the measured window the DRAM is bought on (local GB per server, GB per pool), "
        "judged on the rest (its arrivals that no longer fit are counted, and DIMMs added where they must); 0: "
        "bought on the window it is judged on; auto: the window's first whole weeks, up to half of it, once its "
        "arrivals span two weeks (a shorter span: 0)"))


class BacktestParams(Section):
    """params.yaml ``backtest``: the nightly job replayed night by night (``pond backtest``)."""

    section = "backtest"
    nights: int = Field(14, ge=1,
        description="nightly jobs replayed, ending at base.as_of; their next days are simulate's window")


class QosParams(Section):
    """params.yaml ``qos``: the QoS monitor as the replay runs it (Pond §4.4, §6.4.3; ``evaluation.qos``)."""

    section = "qos"
    threshold: float = Field(0.5, gt=0, le=1, description=(
        "where there is no monitor model or the data do not say how counters change on a pool: a VM on the pool is "
        "flagged when the LI model gives its own first-hour counters a probability of exceeding the PDM of at least "
        "this (the service's POND_QOS_THRESHOLD default, /v1/qos); the monitor model flags at its own threshold"))
    max_mitigated_share: float = Field(0.01, ge=0, le=1, description=(
        "mitigations per day, share of the day's VMs (Pond: up to 1%); a flagged VM past it stays as placed"))
    touches: Literal["every", "judged"] = Field("every", description=(
        "a zNUMA that touched its pool node: every: flagged and moved to local DRAM (within the capacity); judged: "
        "only where the monitor model flags its counters with its touched memory past the local node on the pool "
        "(Pond 4.4; optimize.monitor.touch_spill_pct), every touch where there is no monitor model or mechanisms "
        "table; the solver then charges every zNUMA overprediction, as the budget counts it"))
    alpha_neighbors: int = Field(5, ge=1, description=(
        "SLA-alpha, reported beside all-local mitigation: a flagged VM's spill curve is the mean of this many lab "
        "workloads nearest in its own counters (evaluation.sla_alpha)"))
    refusal_hours: float = Field(168.0, ge=0, allow_inf_nan=False, description=(
        "once the monitor flags an insensitive call, the LI call is refused to the later VMs of its customer and VM "
        "type for this many hours after the flag (each flag extends it; they get the UM split); 0: never refused "
        "(evaluation.refusal; the service's POND_QOS_REFUSAL_HOURS)"))


class GateParams(Section):
    """params.yaml ``register``."""

    section = "register"
    model_name: str = Field("pond-znuma", min_length=1,
                            description="MLflow registered model the night's bundle becomes a version of")
    max_pool_share_drop: float = Field(0.02, ge=0, le=1,
        description="the gate: share of GB the candidate may give up against the champion on the same VMs")


class EngineParams(Section):
    """params.yaml ``engine``: where the fleet-sized stages run (``core.cluster``)."""

    section = "engine"
    backend: Literal["local", "dask"] = Field("local",
        description="local: one process (pandas/DuckDB); dask: features, simulate, evaluate's scoring and the UM "
                    "fits of train_um and backtest (lightgbm.dask) on a dask.distributed cluster, DASK_SCHEDULER_ADDRESS (or pond "
                    "--scheduler) or a LocalCluster the stage starts")
    workers: int = Field(2, ge=1, description="local: threads that run simulate's sizing tasks and processes that "
                                              "run backtest's nights (one: in order); "
                                              "dask, no scheduler address: worker processes of the LocalCluster")
    worker_memory: str = Field("4GiB", min_length=1,
        description="dask, no scheduler address: memory limit per worker (dask spills, then pauses, above it)")
    partitions: int = Field(16, ge=1,
        description="dask: partitions the VMs are shuffled into, by customer in features (a customer's VMs meet "
                    "in one), by cluster in simulate (a cluster's VMs are placed together)")


INJECTED = {("generate", "lab"): "seed", ("generate", "fleet"): "seed", ("features",): "as_of"}
INJECTED_KEYS = {".".join((*path, key)) for path, key in INJECTED.items()}   # set from base.*, not params keys


class BaseParams(Section):
    section = "base"
    seed: int = Field(42, description="every random draw of every stage")
    as_of: Day = Field("2026-01-28", description="the nightly job's day: train on data up to it, serve the next day")


class GenerateParams(Section):
    section = "generate"
    variant: Literal["pond", "walks"] = Field("pond",
        description="mechanism strengths of the built-in fleet (telemetry/fleet/lab.py VARIANTS)")
    lab: LabParams = Field(default_factory=LabParams, description="the built-in lab")
    fleet: FleetParams = Field(default_factory=FleetParams, description="the built-in VM fleet")


# The section is called `register` (DVC stage name); pydantic warns that the name shadows ABCMeta's
# classmethod `register`, which instances never reach: the field is what `params.register` returns.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message='Field name "register"', category=UserWarning)

    class Params(Section):
        """The whole of params.yaml."""

        base: BaseParams = Field(default_factory=BaseParams)
        generate: GenerateParams = Field(default_factory=GenerateParams)
        features: FeatureParams   # always given: _share_base adds as_of
        train_li: LiParams = Field(default_factory=LiParams)
        train_um: UmParams = Field(default_factory=UmParams)
        train_monitor: MonitorParams = Field(default_factory=MonitorParams)
        optimize: OptimizeParams = Field(default_factory=OptimizeParams)
        backtest: BacktestParams = Field(default_factory=BacktestParams)
        simulate: SimParams = Field(default_factory=SimParams)
        qos: QosParams = Field(default_factory=QosParams)
        register: GateParams = Field(default_factory=GateParams)
        engine: EngineParams = Field(default_factory=EngineParams)

        @model_validator(mode="before")
        @classmethod
        def _share_base(cls, data: Any) -> Any:
            """Hand base.seed and base.as_of to the sections that use them (never set there)."""
            if not isinstance(data, dict):
                return data
            data = {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}
            base = BaseParams(**(data.get("base") or {}))
            data["base"] = base
            for path, key in INJECTED.items():
                parent = data
                for name in path[:-1]:
                    parent = parent.setdefault(name, {})
                    if not isinstance(parent, dict):
                        return data            # a section of the wrong type: pydantic says so
                section = dict(parent.get(path[-1]) or {})
                if key in section:
                    raise ValueError(f"{'.'.join(path)}.{key} is set by base.{key}; remove it there")
                section[key] = base.seed if key == "seed" else base.as_of
                parent[path[-1]] = section
            return data

        @model_validator(mode="after")
        def _consistent(self) -> Params:
            li = self.train_li
            if self.optimize.latency_ratio not in li.latency_ratios or self.optimize.pdm not in li.pdms:
                raise ValueError(f"optimize asks for latency_ratio {self.optimize.latency_ratio:g} and pdm "
                                 f"{self.optimize.pdm:g}, but train_li trains ratios {list(li.latency_ratios)} "
                                 f"and pdms {list(li.pdms)}: add them to train_li")
            missing = [r for r in self.simulate.latency_ratios if r not in li.latency_ratios]
            if missing:
                raise ValueError(f"simulate.latency_ratios {missing} have no LI model: add them to "
                                 f"train_li.latency_ratios {list(li.latency_ratios)}")
            return self

        def with_as_of(self, as_of: str, latency_ratio: float | None = None) -> Params:
            """The same parameters for another night (``pond backtest``), optionally its policy
            for another latency ratio."""
            data = self.model_dump()
            for path, key in INJECTED.items():
                section = data
                for name in path:
                    section = section[name]
                del section[key]
            data["base"]["as_of"] = as_of
            if latency_ratio is not None:
                data["optimize"]["latency_ratio"] = latency_ratio
            return Params(**data)

        def with_backend(self, backend: str | None) -> Params:
            """The same parameters on another engine (``pond --engine``); None keeps the file's."""
            if backend is None:
                return self
            return self.model_copy(update={"engine": self.engine.model_copy(update={"backend": backend})})


def load(path: Path | str = "params.yaml", backend: str | None = None) -> Params:
    """The params file, checked; ``backend`` overrides ``engine.backend`` (``pond --engine``)."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path} not found: run from the repository root or pass --params")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML ({exc}); fix the file") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold one mapping of sections (base, generate, features, ...)")
    return Params(**data).with_backend(backend)
