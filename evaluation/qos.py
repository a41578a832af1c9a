"""Pond's QoS monitor in the replay (Pond §4.4, §6.4.3): a VM on the pool that its first window shows slowed gets
its pool memory back as local, up to a share of the day's VMs.

What the monitor sees, and when:

- **An insensitive call** (pool-only, or a capped zNUMA of one): after the VM's first QoS window, flagged from its
  counters as ``optimize.monitor.monitor_flags`` says: the monitor model on its counters under the pool where the
  data allow, else the LI model on its own first-hour counters. A VM without counters is not seen. The flag can be
  wrong both ways: a missed false positive stays slowed; a false alarm costs DRAM.
- **A zNUMA** is caught by the VM touching its zNUMA node, which the hypervisor's access bits show. An overpredicted
  zNUMA (it touched more than its local node: ``outcomes``' ``overpredicted``) is flagged; one that never touches
  the pool is never flagged. The data say how much a VM touched, not when, so the touch is taken to show within the
  first window, as the counters do. Pond's monitor goes one step further (§4.4): it moves a zNUMA that touched its
  pool to local DRAM only if the sensitivity model says the VM suffers (``watch``'s ``touch_seen``, ``judged_touches``;
  ``qos.touches: judged``).

Mitigation: the flagged VMs in order of creation (each flagged one window after it), up to
``floor(max_mitigated_share x the day's VMs)``; each gets its pool memory back as local from then on
(``mitigated_gb``). A flagged VM past the capacity stays as placed. A misprediction is *unmitigated* when the
monitor missed it or had no capacity left: the VM stays slowed past the PDM beyond its first window.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def judged_touches(touched_gb: np.ndarray, local_gb: np.ndarray, least_pct: np.ndarray) -> np.ndarray:
    """Whether the monitor flags each VM's touch of its pool node (Pond §4.4): its touched memory past the local node
    is at least ``least_pct`` % of what it touched (``optimize.monitor.touch_spill_pct``: the least spilled share
    the monitor model flags the VM at; 0: every touch, inf: none)."""
    touched = np.asarray(touched_gb, float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return 100.0 * (touched - np.asarray(local_gb, float)) / touched >= np.asarray(least_pct, float)


def watch(out: pd.DataFrame, seen_slowed: np.ndarray, created: np.ndarray, max_share: float,
          day: np.ndarray | None = None, touch_seen: np.ndarray | None = None) -> pd.DataFrame:
    """``out`` (``evaluation.combined.outcomes``) with what the monitor did per VM: ``flagged``, ``mitigated``,
    ``mitigated_gb`` (pool memory given back as local), ``false_alarm`` (an insensitive call mitigated whose
    workload is known to stay within the PDM) and ``unmitigated`` (mispredicted and not mitigated).
    ``seen_slowed``: per VM, whether the monitor flags it as an insensitive call (``optimize.monitor.monitor_flags``);
    ``created``: creation times, the order of flags;
    ``day``: per VM, the day whose capacity it draws on (default: one day, all of ``out``);
    ``touch_seen``: per VM, whether the monitor judges a zNUMA that touched its pool node to suffer past the PDM
    (Pond §4.4 mitigates only those); None: every such touch is flagged."""
    pooled = out["pool_gb"].to_numpy(float) > 0
    called = out["li_called"].to_numpy(bool) & pooled
    touched_pool = pooled & ~called & out["overpredicted"].to_numpy(bool)
    if touch_seen is not None:
        touched_pool &= np.asarray(touch_seen, bool)
    flagged = (called & np.asarray(seen_slowed, bool)) | touched_pool
    day = np.zeros(len(out), np.int64) if day is None else pd.factorize(np.asarray(day), sort=True)[0]
    capacity = np.floor(max_share * np.bincount(day, minlength=day.max(initial=-1) + 1)[day] + 1e-9)
    order = np.lexsort((np.asarray(created), day))          # by day, then in order of creation
    spent = pd.Series(flagged[order]).groupby(day[order]).cumsum().to_numpy()
    mitigated = np.zeros(len(out), bool)
    mitigated[order] = flagged[order] & (spent <= capacity[order])
    mispredicted = out["false_positive"].to_numpy(bool) | out["overpredicted"].to_numpy(bool)
    insensitive = out["sensitive"].to_numpy(float) == 0.0             # known to stay within the PDM
    return out.assign(flagged=flagged, mitigated=mitigated,
                      mitigated_gb=np.where(mitigated, out["pool_gb"].to_numpy(float), 0.0),
                      false_alarm=mitigated & called & insensitive, unmitigated=mispredicted & ~mitigated)


def summarize(watched: pd.DataFrame, fp_estimate_rate: float = 0.0) -> dict[str, float | int]:
    """The monitor's day, shares of the day's VMs (GB: of its memory). A pool-only VM without slowdown truth counts
    the lab's error rate (as ``evaluation.combined.summarize``) unless it was mitigated."""
    n = max(len(watched), 1)
    gb = float(watched["memory_gb"].sum())
    unknown = watched["li_called"] & ~watched["lab_truth"] & ~watched["mitigated"]
    mispredicted = watched["false_positive"] | watched["overpredicted"]
    return {
        "mispredictions_unmitigated": float(watched["unmitigated"].sum() / n + unknown.sum() * fp_estimate_rate / n),
        "monitor_flags": float(watched["flagged"].sum() / n),
        "mitigations": float(watched["mitigated"].sum() / n),
        "mitigation_capacity_reached": bool((watched["flagged"] & ~watched["mitigated"]).any()),
        "mitigated_gb_share": float(watched["mitigated_gb"].sum() / gb) if gb else 0.0,
        "false_alarms": float(watched["false_alarm"].sum() / n),
        "false_alarm_gb_share": float(watched.loc[watched["false_alarm"], "mitigated_gb"].sum() / gb) if gb else 0.0,
        "missed_by_monitor": float((mispredicted & ~watched["flagged"]).sum() / n),
        "over_monitor_capacity": float((mispredicted & watched["flagged"] & ~watched["mitigated"]).sum() / n),
        # of the insensitive calls slowed past the PDM (false positives with truth), the share the monitor flags
        "monitor_recall": (float((watched["false_positive"] & watched["flagged"]).sum() / fps)
                           if (fps := int(watched["false_positive"].sum())) else None),
        "false_positives_with_truth": fps,
    }
