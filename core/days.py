"""The nightly job's day and the windows around it, each written once.

``as_of`` is the last day whose data the night may use; the night ends at the UTC midnight after it
(``end_of``), which is also when the served next day begins. Everything known "by the end of as_of"
is strictly before ``end_of(as_of)``.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pandas as pd


def _utc(as_of: Any) -> pd.Timestamp:
    t = pd.Timestamp(as_of)
    return t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")


def day_of(as_of: Any) -> date:
    """The as-of day (a date, a ``YYYY-MM-DD`` string or a timestamp; an aware one is read in UTC)."""
    return _utc(as_of).date()


def end_of(as_of: Any) -> pd.Timestamp:
    """The UTC midnight after the as-of day: the night's end and the next day's start."""
    return _utc(as_of).normalize() + pd.Timedelta(days=1)


def next_day(as_of: Any) -> date:
    """The day the night's policy serves, and evaluate scores."""
    return day_of(as_of) + timedelta(days=1)


def days_up_to(as_of: Any, days: int) -> tuple[date, date]:
    """The first and last of the ``days`` creation days ending with the as-of day."""
    last = day_of(as_of)
    return last - timedelta(days=days - 1), last


def in_days_up_to(created_at: pd.Series, as_of: Any, days: int) -> pd.Series:
    """Whether each ``created_at`` falls in the ``days`` days ending with the as-of day."""
    end = end_of(as_of)
    return (created_at >= end - pd.Timedelta(days=days)) & (created_at < end)
