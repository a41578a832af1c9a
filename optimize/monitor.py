"""The QoS monitor (Pond §4.4): what it flags of a VM called insensitive once its first window has run on the
pool, and its flags as the fleet's evidence on LI errors.

What the monitor sees (``monitor_flags``), the better of two the data allow:

- **Counters under the allocation** (``pool_counters``): where the data set says how its workloads' counters respond
  to a pool (the built-in fleet's ``contract.POOL_FILE``) and a monitor model is trained (``train_monitor``), each
  VM's own first-hour counts are shown as they read with its memory on the pool at the ratio
  (``telemetry.fleet.pool_counters.on_pool``: its own cycles and counter noise, the pool's mechanisms), and the
  monitor model scores them with the allocation, flagged at its threshold for a VM all on the pool at the ratio
  (``MonitorModel.threshold``, ``whole``). The scorer judges an insensitive call as if all its memory were on the
  pool (``evaluation.combined``), so the monitor is shown that allocation too, whatever the policy's pool cap: the
  flag depends on neither the LI threshold nor the UM target.
- **Counters the hypervisor recorded on a pool** (``vm_pool_counters``, a provider's data set with that optional
  table): the VMs it has rows for are scored by the monitor model on those counts, at the allocation they had
  (``recorded_scores``); the others as below.
- **First-hour counters** (``first_hour``, any other data set): the VM's own local counters, scored by the LI model
  the policy served (``monitor_scores``), flagged at ``qos.threshold``: a monitor that can only agree with the model
  that called the VM (on the built-in fleet its flags were 0.6-0.8 of the true errors among called VMs).

Neither reads slowdown truth: the counters come from the workload's mechanisms and the VM's own counts.

As evidence (``optimize.tonight.monitor_evidence``): the lab runs each workload once and cannot say how often the
fleet's VMs called insensitive err. The monitor flags every VM after its first window, so on the nights before
``base.as_of`` it says, without any truth, how many of the VMs the LI model would have called it sees slowed.

- **Misses.** A VM the monitor does not flag may still be slowed: the flag rate is divided by the monitor's recall,
  measured on lab workloads it never saw (the monitor model's, with the whole footprint on the pool; the LI model's
  out-of-fold curves for the first-hour monitor).
- **False alarms** are counted as errors by default: cautious, and the lab's false-alarm rate is reported beside
  (taking the lab's rate over every run within the PDM off the flag rate was tried: on a draw whose calls the
  monitor flags less than the lab's, it left no evidence and the budget broke). With
  ``optimize.discount_false_alarms`` and the monitor model, its held-out false-alarm rate among
  the lab's workloads within the PDM that the LI model calls at each threshold (``false_alarm_counts``, its
  posterior mean) comes off first: a flag rate ``f`` says the error rate ``(f - phi) / (rho - phi)``
  (``over_recall``). It is off: the lab judges that rate on some 70 called workloads, and on seed 43 the discount
  took the evidence of a fleet that erred more than the lab, and the budget broke.

The flags only ever make the solver more cautious (``optimize.solver.more_cautious``): they raise the charged rate
where the fleet errs more than the lab, never lower it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pond.core.params import QosParams
from pond.features.history import own_counts, own_features
from pond.models.inference import Models
from pond.models.monitor_runtime import MonitorModel
from pond.optimize.solver import NextNight, error_rate
from pond.telemetry.contract import POOL_FILE, VM_POOL_COUNTERS, event_columns
from pond.telemetry.fleet.pool_counters import on_pool
from pond.telemetry.io import counters_source, read_optional, read_raw
from pond.telemetry.storage import Location, location


def own_rows(vms: pd.DataFrame, raw_dir: Location) -> pd.DataFrame:
    """Each VM's own first-hour counters as LI features, one row per row of ``vms`` (NaN: no counters)."""
    own = own_features(vms["vm_id"], counters_source(raw_dir))
    return own.reindex(vms["vm_id"].astype(str).to_numpy()).reset_index(drop=True)


def monitor_scores(models: Models, vms: pd.DataFrame, raw_dir: Location, own: pd.DataFrame | None = None
                   ) -> np.ndarray:
    """P(exceed the PDM) per VM from its own first-hour counters, by the served LI model (``/v1/qos``'s score);
    NaN for a VM without counters. ``own``: ``own_rows`` of ``vms``, where the caller has them."""
    return 1.0 - models.p_insensitive(own_rows(vms, raw_dir) if own is None else own)


def lab_recall(lab: pd.DataFrame, qos_threshold: float) -> tuple[int, int, int, int]:
    """(sensitive lab workloads the monitor flags, sensitive ones, insensitive ones it flags, insensitive ones)
    from the LI model's out-of-fold curves (``threshold``, ``called``, ``errors``, ``n``: called at
    P(insensitive) >= threshold). The monitor flags at 1 - P(insensitive) >= ``qos_threshold``; a workload exactly
    at the boundary counts as not flagged (a lower recall: cautious)."""
    curves = lab[np.isfinite(lab.threshold.to_numpy(float))].sort_values("threshold")
    if curves.empty:
        return 0, 0, 0, 0
    everyone = curves.iloc[0]                       # threshold 0: every workload called
    n = int(everyone.n)
    sensitive = int(everyone.errors)
    at = curves[curves.threshold.to_numpy(float) >= 1.0 - qos_threshold - 1e-9]
    kept_sensitive = int(at.errors.iloc[0]) if len(at) else 0          # P(insensitive) >= 1 - qos: not flagged
    kept_insensitive = int(at.called.iloc[0] - at.errors.iloc[0]) if len(at) else 0
    return sensitive - kept_sensitive, sensitive, (n - sensitive) - kept_insensitive, n - sensitive


def recall(caught: int, sensitive: int) -> float:
    """The Jeffreys posterior mean of the monitor's recall (``solver.error_rate``'s): 1/2, the prior, where the lab
    has no sensitive workload, which doubles the flag rate: no evidence of recall is not evidence of a perfect
    monitor."""
    return float(error_rate(np.array([sensitive]), np.array([caught]))[0])


def _called_flags(scores: pd.DataFrame | None, shares: pd.Series | None, thresholds: np.ndarray, insensitive: int
                  ) -> tuple[np.ndarray, np.ndarray] | None:
    """Per LI threshold, over the lab workloads of class ``insensitive`` that the LI model calls out of fold at it
    (P(insensitive) >= threshold): the monitor's flags and the workloads, each counted once with its share of runs
    all on the pool flagged. Runs of one workload are not independent evidence. None where either input is missing
    (a model trained before they were kept)."""
    if scores is None or shares is None or scores.empty or shares.empty:
        return None
    rows = scores[scores.insensitive.to_numpy() == insensitive]
    share = shares.reindex(rows.workload_id.astype(str).to_numpy()).to_numpy(float)
    judged = ~np.isnan(share)                      # a workload without runs all on the pool was not judged
    called = rows.p_insensitive.to_numpy(float)[judged][None, :] >= np.asarray(thresholds, float)[:, None]
    return (called * share[judged][None, :]).sum(axis=1), called.sum(axis=1).astype(float)


def band_recall(scores: pd.DataFrame | None, shares: pd.Series | None, thresholds: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray] | None:
    """Per LI threshold, the monitor's held-out recall among the lab's LI errors at it, as (caught, errors): the
    workloads the LI model calls out of fold (``scores``: ``train_li``'s ``heldout_scores``) yet sensitive, with
    their shares of runs flagged (``shares``: ``MonitorModel.flag_shares``)."""
    return _called_flags(scores, shares, thresholds, 0)


def false_alarm_counts(scores: pd.DataFrame | None, shares: pd.Series | None, thresholds: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray] | None:
    """Per LI threshold, the monitor's held-out false alarms among the lab workloads within the PDM that the LI
    model calls at it, as (flagged, called): the calls the fleet's flags come from are these, not every run within
    the PDM, and the higher the threshold the further they sit from the border."""
    return _called_flags(scores, shares, thresholds, 1)


def false_alarm_rate(counts: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """The false-alarm rate per LI threshold, the Jeffreys posterior mean of ``false_alarm_counts`` (an estimate,
    not a bound: the nights' spread of the flags already gives the charged rate its quantile); 0 where no called
    workload was judged."""
    k, n = (np.asarray(x, float) for x in counts)
    return np.where(n > 0, (k + 0.5) / (n + 1.0), 0.0)


def nearest_counts(scores: pd.DataFrame | None, shares: pd.Series | None, thresholds: np.ndarray, at_least: int
                   ) -> tuple[np.ndarray, np.ndarray] | None:
    """``band_recall``'s (caught, errors) per LI threshold, over the lab's LI errors called at it and, where fewer
    than ``at_least`` are, over the ``at_least`` the LI model came nearest to calling (its highest out-of-fold
    P(insensitive)): the calls near a threshold err on workloads borderline on the pool, which the monitor misses
    most, so its recall over every run past the PDM overstates it there, and a threshold the lab has no error at
    would otherwise have no recall to go on. None where the lab has no judged LI error."""
    if scores is None or shares is None or scores.empty or shares.empty:
        return None
    errs = scores[scores.insensitive.to_numpy() == 0]
    share = shares.reindex(errs.workload_id.astype(str).to_numpy()).to_numpy(float)
    judged = ~np.isnan(share)
    if not judged.any():
        return None
    order = np.argsort(-errs.p_insensitive.to_numpy(float)[judged], kind="stable")
    p, caught = errs.p_insensitive.to_numpy(float)[judged][order], np.r_[0.0, np.cumsum(share[judged][order])]
    called = (p[None, :] >= np.asarray(thresholds, float)[:, None]).sum(axis=1)
    n = np.minimum(np.maximum(called, at_least), len(p))
    return caught[n], n.astype(float)


def over_recall(flags: NextNight, monitor_recall: float | np.ndarray, false_alarm: float | np.ndarray = 0.0
                ) -> NextNight:
    """Tonight's error rate among the VMs the model calls, per LI threshold, from tonight's share of them the
    monitor flags (``evidence.tonight`` of the flags): ``f = rho e + phi (1 - e)``, so ``e = (f - phi) / (rho -
    phi)`` with its recall ``rho`` and false-alarm rate ``phi`` (one, or one per threshold). Where ``phi`` reaches
    ``rho`` the flags cannot tell errors from alarms, and every flag counts as an error."""
    rho = np.maximum(np.asarray(monitor_recall, float), 1e-9)
    phi = np.asarray(false_alarm, float)
    phi = np.where(phi < rho, phi, 0.0)
    return NextNight((flags.center - phi) / (rho - phi), flags.scale / (rho - phi), flags.df)


POOL_COUNTERS, RECORDED, FIRST_HOUR = "pool_counters", "vm_pool_counters", "first_hour"


@dataclass(frozen=True)
class Flags:
    """Per VM: P(exceeds the PDM) as the monitor scores it (NaN: not seen), whether it flags the VM, and which
    monitor it is (``POOL_COUNTERS``, ``RECORDED`` or ``FIRST_HOUR``); with ``qos.touches: judged`` and the monitor
    model on counters under the pool, the least spilled share at which it flags a zNUMA of the VM that touched its
    pool node (``touch_spill_pct``; None: every touch flagged)."""

    p_exceed: np.ndarray
    seen_slowed: np.ndarray
    source: str
    touch_spill_pct: np.ndarray | None = None


def read_mechanisms(raw_dir: Location) -> pd.DataFrame | None:
    """The workloads' response to a pool, by ``workload_id``; None where the data set has none."""
    path = location(raw_dir) / POOL_FILE
    if not path.exists():
        return None
    m = read_raw(path, "population_pool")
    return m.assign(workload_id=m.workload_id.astype(str)).drop_duplicates("workload_id").set_index("workload_id")


def monitor_flags(vms: pd.DataFrame, raw_dir: Location, ratio: float, models: Models, qos: QosParams,
                  monitor: MonitorModel | None, own: pd.DataFrame | None = None) -> Flags:
    """The monitor's flag of each VM of ``vms`` were it an insensitive call on the pool at ``ratio`` (module doc).
    ``own``: ``own_rows`` of ``vms``, where the caller has them (the first-hour monitor's input)."""
    p = pool_scores(vms, raw_dir, ratio, monitor)
    if p is not None:
        assert monitor is not None
        least = touch_spill_pct(vms, raw_dir, ratio, monitor) if qos.touches == "judged" else None
        with np.errstate(invalid="ignore"):
            return Flags(p, p >= monitor.threshold(ratio, whole=True), POOL_COUNTERS, least)
    first = monitor_scores(models, vms, raw_dir, own)
    with np.errstate(invalid="ignore"):
        flags = first >= qos.threshold
    recorded = recorded_scores(vms, raw_dir, ratio, monitor)
    if recorded is None:
        return Flags(first, flags, FIRST_HOUR)
    assert monitor is not None
    on = ~np.isnan(recorded)
    with np.errstate(invalid="ignore"):
        return Flags(np.where(on, recorded, first), np.where(on, recorded >= monitor.threshold(ratio), flags),
                     RECORDED)


def recorded_scores(vms: pd.DataFrame, raw_dir: Location, ratio: float, monitor: MonitorModel | None,
                    until: pd.Timestamp | None = None) -> np.ndarray | None:
    """P(exceeds the PDM) of each VM by the monitor model, on the counts the hypervisor recorded while it ran with
    memory on a pool at ``ratio`` (``vm_pool_counters``: its windows summed, at their mean pool share; only rows
    measured after the VM's creation and, with ``until``, by then). NaN for a VM without such rows; None where
    there is no monitor model or no such table. The allocation is the one the VM had, not the one a replayed policy
    gives it: a VM slowed on part of the pool would be slowed on all of it, one within the PDM may not be."""
    rows = read_optional(raw_dir, "vm_pool_counters") if monitor is not None else None
    if rows is None or monitor is None:
        return None
    created = vms.set_index(vms["vm_id"].astype(str))["created_at"]
    rows = rows.assign(vm_id=rows["vm_id"].astype(str))
    at = created.reindex(rows["vm_id"]).set_axis(rows.index)            # NaT: a VM not in ``vms``
    keep = np.isclose(rows["latency_ratio"].to_numpy(float), ratio) & (rows["measured_at"] > at).to_numpy(bool)
    if until is not None:
        keep &= (rows["measured_at"] <= until).to_numpy()
    rows = rows[keep]
    p = np.full(len(vms), np.nan)
    if rows.empty:
        return p
    events = event_columns(rows, VM_POOL_COUNTERS)
    lacking = [e for e in monitor.needs(events) if e not in events]
    if lacking:          # counted for another model: the VMs fall back to their first-hour counters, the night runs
        print(f"QoS monitor: vm_pool_counters lacks {len(lacking)} of the events the monitor's model reads "
              f"(e.g. {lacking[0]!r}): its VMs are monitored on their first-hour counters; count train_monitor.events",
              file=sys.stderr)
        return None
    per_vm = rows.groupby("vm_id", sort=True)
    counts, pool_gb = per_vm[events].sum(min_count=1), per_vm["pool_gb"].mean()
    ids = vms["vm_id"].astype(str).to_numpy()
    has = pd.Index(counts.index).get_indexer(ids)
    seen = has >= 0
    share = np.clip(pool_gb.to_numpy(float)[has[seen]] / vms["memory_gb"].to_numpy(float)[seen], 0.0, 1.0)
    p[seen] = monitor.p_exceeds(counts.iloc[has[seen]].reset_index(drop=True), events, share,
                                np.full(int(seen.sum()), ratio))
    return p


def pool_scores(vms: pd.DataFrame, raw_dir: Location, ratio: float, monitor: MonitorModel | None,
                spilled_pct: np.ndarray | None = None) -> np.ndarray | None:
    """P(exceeds the PDM) of each VM by the monitor model, on its own counts as they read with all its memory on the
    pool at ``ratio`` (NaN: no counters, or a workload the mechanisms do not know); None where there is no monitor
    model, no ``vms.workload_id`` or no ``contract.POOL_FILE``. ``spilled_pct``: per VM, the share of its footprint
    on the pool instead (0-100; a zNUMA that touched past its local node)."""
    mech = read_mechanisms(raw_dir) if monitor is not None and "workload_id" in vms.columns else None
    if mech is None or monitor is None:
        return None
    ids = vms["vm_id"].astype(str).to_numpy()
    counts = own_counts(vms["vm_id"], counters_source(raw_dir), monitor.events).reindex(ids)
    workload = vms["workload_id"].astype("string").to_numpy(dtype=object, na_value="")
    m = mech.reindex(workload).reset_index(drop=True)
    seen = counts.notna().any(axis=1).to_numpy() & m[m.columns[0]].notna().to_numpy()
    p = np.full(len(vms), np.nan)
    if seen.any():
        spilled = np.full(int(seen.sum()), 100.0) if spilled_pct is None else np.asarray(spilled_pct, float)[seen]
        under = on_pool(counts[seen].reset_index(drop=True), m[seen].reset_index(drop=True), ratio, spilled)
        p[seen] = monitor.p_exceeds(under, list(under.columns), spilled / 100.0, np.full(int(seen.sum()), ratio))
    return p


SPILL_LEVELS = np.arange(5.0, 100.1, 5.0)


def touch_spill_pct(vms: pd.DataFrame, raw_dir: Location, ratio: float, monitor: MonitorModel | None,
                    levels: np.ndarray = SPILL_LEVELS) -> np.ndarray | None:
    """Per VM, the least share of its footprint on the pool (%, one of ``levels``) at which the monitor model flags
    it at ``ratio`` (its threshold over every spilled share): Pond §4.4 moves a zNUMA that touched its pool node to
    local DRAM only if the model says it suffers, and a VM's spill depends on the zNUMA a policy gave it. inf where
    no level is flagged; 0 where the model cannot score the VM (no counters, an unknown workload): every touch
    flagged, as without the model. None as ``pool_scores``."""
    n, levels = len(vms), np.asarray(levels, float)
    rows = vms.iloc[np.tile(np.arange(n), len(levels))].reset_index(drop=True)
    p = pool_scores(rows, raw_dir, ratio, monitor, np.repeat(levels, n))
    if p is None or monitor is None:
        return None
    p = p.reshape(len(levels), n)
    with np.errstate(invalid="ignore"):
        flagged = p >= monitor.threshold(ratio)
    least = np.where(flagged.any(axis=0), levels[np.argmax(flagged, axis=0)], np.inf)
    return np.where(np.isnan(p).all(axis=0), 0.0, least)
