"""The service's memory of the QoS monitor's flags, replayed: once the monitor flags an insensitive call, the LI call
is refused to the later VMs of the same customer and VM type (a deployment: one workload) for ``qos.refusal_hours``.

Why: an LI call that is wrong for one VM of a deployment is wrong for the next hundred, and at 16,000 VMs a day one
deployment can put more slowed VMs on the pool in a day than the monitor may move back (``qos.max_mitigated_share``).
A refused VM is decided as if the LI model had no prediction for it: Pond's UM split (a zNUMA node where the UM model
predicts untouched memory), never all of it on the pool.

What the service knows, and when (``serving.flag_memory`` holds it):

- a flag arrives one QoS window after the flagged VM's creation (``features.counter_delay_s``: its counters cover
  that long), and refuses from then until ``refusal_hours`` after it; every later flag of the group extends it;
- a refused VM is no insensitive call, so it raises no flag of its own: once the refusal ends, the next flagged call
  of the group arms it again.

``evaluation.refusal_nights`` runs the memory through the backtest's nights. The flags are the monitor's (``optimize.monitor.monitor_flags``, from counters), never the scorer's truth, and each
flag is of a VM created before the refusal it starts: the replay is the service's, in time order.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def refused_calls(group: np.ndarray, created_s: np.ndarray, called: np.ndarray, flagged: np.ndarray, lag_s: float,
                  hold_s: float) -> np.ndarray:
    """Per VM, whether the service refuses its LI call: one of its group's (customer, VM type) earlier insensitive
    calls was flagged, known ``lag_s`` after that call's creation, at most ``hold_s`` before this VM's creation (the
    module says how). ``called``/``flagged``: the calls and flags without any refusal; ``hold_s`` 0: never refused.
    Vectorized over groups: each round finds every group's next refusal."""
    n = len(created_s)
    refused = np.zeros(n, bool)
    if hold_s <= 0 or n == 0:
        return refused
    codes, _ = pd.factorize(np.asarray(group, dtype=object))
    t = np.asarray(created_s, np.float64)
    order = np.lexsort((t, codes))
    c, t = codes[order], t[order]
    live_flags = (np.asarray(called, bool) & np.asarray(flagged, bool))[order]
    out = np.zeros(n, bool)
    cursor = np.full(codes.max(initial=-1) + 1, -np.inf)    # a group's flags count from here on
    while True:
        live = live_flags & ~out & (t >= cursor[c])
        if not live.any():
            break
        first = np.full(len(cursor), np.inf)
        np.minimum.at(first, c[live], t[live])
        start = first + lag_s                               # the first flag reaches the service
        before = live & (t < start[c])                      # flags of calls made before the refusal starts
        end = np.full(len(cursor), -np.inf)
        np.maximum.at(end, c[before], t[before] + lag_s + hold_s)
        out |= (t >= start[c]) & (t < end[c])               # a group without a flag: start inf, end -inf
        cursor = np.where(np.isfinite(first), end, np.inf)  # flags of the refused VMs are none: the next counts after
    refused[order] = out
    return refused


def group_of(customer_id: pd.Series, vm_type: pd.Series) -> np.ndarray:
    """The group the service remembers a flag for: the customer and the VM type (``serving.flag_memory.key``)."""
    return (customer_id.astype(str) + "\x1f" + vm_type.astype(str)).to_numpy(object)
