"""The nightly production protocol of the UM model: which VMs train, calibrate and get scored.

Night ``as_of`` (a date) ends at the following midnight ``T``. Known labels are those of VMs
deleted before ``T``; VMs created in the ``train_days`` before ``T`` train the model, except
``calib_days`` of creations ending ``calib_lag_days`` before ``T``, which are held out for
conformal calibration. The lag matters: among VMs created in the last day or two, only the
short-lived have ended, and short-lived VMs touch less memory, so calibrating on them would
under-state next-day overpredictions. The VMs created on the day after ``as_of`` are the ones
the service scores next, and the ones a backtest evaluates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from models.um import ConformalOffset, UntouchedModel
from telemetry.errors import ConfigError


@dataclass(frozen=True)
class UmParams:
    target_op: float = 0.04
    train_days: int = 21
    calib_days: int = 3
    calib_lag_days: int = 4
    backtest_nights: int = 14
    alphas: tuple[float, ...] = (0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.07, 0.1, 0.13, 0.16, 0.2, 0.25, 0.3, 0.4, 0.5)
    target_grid: tuple[float, ...] = (0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3)

    def __post_init__(self) -> None:
        if not 0 < self.target_op < 1:
            raise ConfigError(f"train_um.target_op must lie in (0, 1), got {self.target_op}")
        if self.train_days < 1 or self.calib_days < 1 or self.backtest_nights < 1 or self.calib_lag_days < 0:
            raise ConfigError("train_um.train_days, calib_days and backtest_nights must be >= 1, calib_lag_days >= 0")
        if self.calib_days + self.calib_lag_days >= self.train_days:
            raise ConfigError("train_um: calib_days + calib_lag_days must be < train_days (the window holds both)")


@dataclass
class Night:
    as_of: pd.Timestamp
    train: pd.DataFrame
    calib: pd.DataFrame
    next_day: pd.DataFrame


def night(vm_features: pd.DataFrame, as_of: str | pd.Timestamp, p: UmParams) -> Night:
    end = pd.Timestamp(as_of, tz="UTC").normalize() + pd.Timedelta(days=1)
    created, deleted = vm_features["created_at"], vm_features["deleted_at"]
    known = deleted.notna() & (deleted < end) & vm_features["untouched_fraction"].notna()
    calib_end = end - pd.Timedelta(days=p.calib_lag_days)
    calib = known & (created >= calib_end - pd.Timedelta(days=p.calib_days)) & (created < calib_end)
    train = known & (created >= end - pd.Timedelta(days=p.train_days)) & ~calib
    nxt = (created >= end) & (created < end + pd.Timedelta(days=1)) & vm_features["untouched_fraction"].notna()
    return Night(end - pd.Timedelta(days=1), vm_features[train], vm_features[calib], vm_features[nxt])


def fit_night(n: Night, alpha: float, target: float, seed: int) -> tuple[UntouchedModel, ConformalOffset]:
    if len(n.train) == 0:
        raise ConfigError(f"night {n.as_of.date()}: no VMs ended in the training window; "
                          "move base.as_of later or raise train_um.train_days")
    model = UntouchedModel(alpha=alpha, seed=seed).fit(n.train, n.train["untouched_fraction"].to_numpy())
    offset = ConformalOffset(target).fit(model.predict(n.calib), n.calib["untouched_fraction"].to_numpy())
    return model, offset


def labels(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    return df["untouched_fraction"].to_numpy(float), df["memory_gb"].to_numpy(float)
