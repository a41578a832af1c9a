"""Rolling backtest of the UM model and its held-out trade-off curves (Pond Fig. 18, §6.4.2)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pond.core.progress import progress
from pond.models.um import conformal_offsets
from pond.models.um_curves import op_at_um, static_curve, um_at_op, um_op
from pond.models.um_protocol import UmParams, backtest_nights, fit_night, fit_night_scored, labels, night, usable


def backtest(vm_features: pd.DataFrame, as_of: str, p: UmParams, seed: int, client: Any = None
             ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per night: realized OP and UM of the raw (alpha = target) and calibrated models on the
    next day; and per night and target OP, the calibrated model's UM and realized OP.

    Strictly before ``as_of``: the last next day scored is ``curve_lag`` days before it, and only
    outcomes observed by the end of ``as_of`` count (the rest are censored and counted)."""
    nights, sweep = [], []
    for n in progress(backtest_nights(vm_features, as_of, p), p.backtest_nights, f"train_um night {as_of}: backtest",
                      "nights"):
        if not usable(n):
            continue  # before the data starts, or a day without VMs: nothing to learn or score
        model, cal, calib_pred = fit_night_scored(n, p.target_op, p.target_op, seed, client)
        raw = model.predict(n.next_day)
        u, mem = labels(n.next_day)
        um_raw, op_raw = um_op(raw, u, mem)
        um_cal, op_cal = um_op(cal.apply(raw), u, mem)
        nights.append({"as_of": n.as_of.date().isoformat(), "target_op": p.target_op, "vms": len(u),
                       "censored": n.censored,
                       "train_vms": len(n.train), "calib_vms": len(n.calib), "offset": cal.offset_,
                       "um_raw": um_raw, "op_raw": op_raw, "um_calibrated": um_cal, "op_calibrated": op_cal})
        offsets = conformal_offsets(calib_pred, n.calib["untouched_fraction"].to_numpy(), p.target_grid)
        um_t, op_t = um_op(np.clip(raw[None, :] - offsets[:, None], 0, 1), u, mem)
        sweep.append(pd.DataFrame({"as_of": n.as_of.date().isoformat(), "target_op": p.target_grid,
                                   "um": um_t, "op": op_t, "vms": len(u), "censored": n.censored}))
    return pd.DataFrame(nights), pd.concat(sweep, ignore_index=True) if sweep else pd.DataFrame()


def solver_curve(sweep: pd.DataFrame) -> pd.DataFrame:
    """Held-out curve for the solver: per target OP, mean UM and mean/max realized OP over nights,
    and the VMs and overpredicted VMs they were measured on (for confidence bounds)."""
    sweep = sweep.assign(overpredicted=np.round(sweep.op * sweep.vms).astype(int))
    g = sweep.groupby("target_op")
    return pd.DataFrame({"um": g.um.mean(), "op": g.op.mean(), "op_max": g.op.max(), "nights": g.size(),
                         "vms": g.vms.sum(), "overpredicted": g.overpredicted.sum()}).reset_index()


def tradeoff(vm_features: pd.DataFrame, as_of: str, p: UmParams, seed: int, client: Any = None
             ) -> tuple[pd.DataFrame, dict]:
    """GBM (one model per target quantile) vs a static fraction, on the day after ``as_of``."""
    n = night(vm_features, as_of, p)
    u, mem = labels(n.next_day)
    rows = []
    for alpha in progress(p.alphas, desc=f"train_um night {as_of}: trade-off", unit="quantiles"):  # a fit each
        model, _ = fit_night(n, alpha, p.target_op, seed, client)
        um, op = um_op(model.predict(n.next_day), u, mem)
        rows.append({"method": "gbm", "knob": alpha, "um": um, "op": op})
    fractions = np.round(np.arange(0.0, 0.96, 0.01), 2)
    s_um, s_op = static_curve(u, mem, fractions)
    curve = pd.concat([pd.DataFrame(rows), pd.DataFrame({"method": "static", "knob": fractions,
                                                         "um": s_um, "op": s_op})], ignore_index=True)
    m: dict = {"tradeoff_vms": len(u)}
    for name, g in curve.groupby("method"):
        for t in (0.10, 0.20):
            m[f"{name}.op_at_um{int(t * 100)}"] = op_at_um(g.um.to_numpy(), g.op.to_numpy(), t)
        m[f"{name}.um_at_op4"] = um_at_op(g.um.to_numpy(), g.op.to_numpy(), 0.04)
    for t in (10, 20):
        g, s = m[f"gbm.op_at_um{t}"], m[f"static.op_at_um{t}"]
        m[f"static_over_gbm_op_at_um{t}"] = s / g if g > 0 else float("inf")
    return curve, m
