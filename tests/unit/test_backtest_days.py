"""`backtest` reads only the creation days its nights use, and every one they use."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pond.evaluation.backtest import days_read, input_drift


@pytest.mark.parametrize("n_nights, train_days", [(1, 1), (7, 21), (14, 28)])
def test_every_night_finds_its_training_window_and_next_day_in_what_is_read(n_nights, train_days):
    last = pd.Timestamp("2026-03-24")
    created = pd.date_range("2026-01-01", "2026-04-30", freq="3h", tz="UTC")
    rng = np.random.default_rng(0)
    vmf = pd.DataFrame({"created_at": created, "day": created.date, "vcpus": rng.integers(1, 64, len(created)),
                        "memory_gb": rng.integers(1, 512, len(created)), "cust_n": rng.normal(size=len(created))})
    first, stop = days_read(last, n_nights, train_days)
    read = vmf[(vmf.day >= first) & (vmf.day <= stop)]
    assert stop == (last + pd.Timedelta(days=1)).date() and len(read) < len(vmf)
    for k in range(n_nights):
        as_of = last - pd.Timedelta(days=k)
        nxt = (as_of + pd.Timedelta(days=1)).date()
        assert (read.day == nxt).sum() == (vmf.day == nxt).sum() > 0
        got, want = (pd.Series(input_drift(v, as_of, train_days, ["cust_n"])) for v in (read, vmf))
        assert got.equals(want)
    earliest = (last - pd.Timedelta(days=n_nights - 1) + pd.Timedelta(days=1 - train_days)).date()   # first night's window
    assert first == earliest - pd.Timedelta(days=1)                                                 # a day's margin
