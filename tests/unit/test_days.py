"""The nightly job's day and its windows have one definition (``core.days``)."""

from __future__ import annotations

import re
from datetime import date

import pandas as pd

from pond.core.days import day_of, days_up_to, end_of, in_days_up_to, next_day
from tests.conftest import ROOT


def test_the_day_and_its_end_by_example():
    for as_of in ("2026-01-28", date(2026, 1, 28), pd.Timestamp("2026-01-28"), pd.Timestamp("2026-01-28", tz="UTC")):
        assert day_of(as_of) == date(2026, 1, 28) and next_day(as_of) == date(2026, 1, 29)
        assert end_of(as_of) == pd.Timestamp("2026-01-29", tz="UTC")
    assert day_of(pd.Timestamp("2026-01-28 23:30", tz="America/New_York")) == date(2026, 1, 29)   # read in UTC
    assert days_up_to("2026-01-28", 7) == (date(2026, 1, 22), date(2026, 1, 28))


def test_the_window_holds_the_days_and_nothing_known_after():
    created = pd.Series(pd.to_datetime(["2026-01-21 23:59:59", "2026-01-22 00:00:00", "2026-01-28 23:59:59",
                                        "2026-01-29 00:00:00"], utc=True))
    assert in_days_up_to(created, "2026-01-28", 7).tolist() == [False, True, True, False]


def test_no_module_rebuilds_the_end_of_the_day():
    rebuilt = re.compile(r"Timestamp\([^)]*as_of[^)]*\)[^\n]*\+ *pd\.Timedelta\(days=1\)")
    offenders = [f"{p.relative_to(ROOT)}:{i}" for d in ("core", "features", "models", "optimize", "simulator", "evaluation",
                                                         "pipelines", "serving", "telemetry")
                 for p in sorted((ROOT / d).rglob("*.py")) if p.name != "days.py"
                 for i, line in enumerate(p.read_text().splitlines(), 1) if rebuilt.search(line)]
    assert not offenders, offenders
