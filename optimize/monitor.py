"""The QoS monitor's flags as the fleet's evidence on LI errors (Pond §4.4).

The lab runs each workload once and cannot say how often the fleet's VMs called insensitive err: on the
built-in fleet they erred 3-8 times as often as the lab's workloads (docs/results.md, "The QoS monitor's
flags as evidence"). The monitor scores every VM after its first window from its own counters, which the
contract holds for every VM whatever its placement, so on the nights before ``base.as_of`` it says, without
any truth, how many of the VMs the LI model would have called it sees slowed.

What the flags miss, and what this does about it:

- **Misses.** A VM the monitor does not flag may still be slowed. The lab measures the monitor's recall among
  its sensitive workloads (out of fold, the same model), and the flag rate is divided by it.
- **Misses the lab cannot see.** Among the VMs the LI model calls, a VM's own counters resemble its history's,
  so the monitor misses more there than in the lab (on the built-in fleet the flags are 0.6-0.8 of the true
  errors among called VMs; the lab's recall is about 0.99). Dividing by the lab's recall therefore still
  understates, and the flags only ever make the solver more cautious (``optimize.solver.more_cautious``): they
  raise the charged rate where the fleet errs more than the lab, never lower it.
- **False alarms** are counted as errors: cautious again, and the lab's false-alarm rate is reported beside.

The monitor's score itself is here too (``own_rows``, ``monitor_scores``: ``/v1/qos``'s, on a VM's own
first-hour counters), which the replay (``evaluation.qos``) decides with.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pond.features.history import own_features
from pond.models.inference import Models
from pond.optimize.solver import NextNight, error_rate
from pond.telemetry.io import counters_source
from pond.telemetry.storage import Location


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


def over_recall(flags: NextNight, monitor_recall: float) -> NextNight:
    """Tonight's error rate among the VMs the model calls, per LI threshold: tonight's share of them the monitor
    flags (``evidence.tonight`` of the flags), divided by its recall."""
    scale = 1.0 / max(monitor_recall, 1e-9)
    return NextNight(flags.center * scale, flags.scale * scale, flags.df)
