"""Customer percentiles use only VMs that ended before the featurized VM's day began."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pond.features.customer import attach_customer_features, customer_percentiles

T = lambda s: pd.Timestamp(s, tz="UTC")


def _vms(rows):
    return pd.DataFrame(rows, columns=["vm_id", "customer_id", "created_at", "deleted_at", "untouched_fraction"])


def test_vm_ending_after_creation_is_not_counted():
    vms = _vms([
        ("a", "c1", T("2026-01-01 01:00"), T("2026-01-02 10:00"), 0.2),   # ended before day 3
        ("b", "c1", T("2026-01-01 02:00"), T("2026-01-03 08:00"), 0.9),   # ends *after* x is created
        ("x", "c1", T("2026-01-03 06:00"), T("2026-01-03 07:00"), 0.5),   # ends before b, same day
        ("y", "c1", T("2026-01-03 09:00"), pd.NaT, np.nan),               # created after b ended
    ])
    out = attach_customer_features(vms, window_days=7, percentiles=[50, 99]).set_index("vm_id")
    # x and y see only a: b ended on day 3 itself, which the nightly snapshot cannot know.
    for vm in ("x", "y"):
        assert out.loc[vm, "cust_n"] == 1
        assert out.loc[vm, "cust_p50"] == pytest.approx(0.2)
    # If leakage were allowed, y would see a, b and x: the median would move to 0.5.
    assert out.loc["a", "cust_n"] == 0 and np.isnan(out.loc["a", "cust_p50"])


def test_trailing_window_drops_old_vms():
    vms = _vms([
        ("old", "c1", T("2026-01-01"), T("2026-01-01 12:00"), 0.1),
        ("new", "c1", T("2026-01-06"), T("2026-01-06 12:00"), 0.7),
        ("z", "c1", T("2026-01-09 03:00"), pd.NaT, np.nan),
        ("other", "c2", T("2026-01-02"), T("2026-01-02 01:00"), 0.3),
    ])
    table = customer_percentiles(vms, window_days=7, percentiles=[50])
    row = table[(table.customer_id == "c1") & (table.day == pd.Timestamp("2026-01-09").date())]
    # 'old' ended on Jan 1: counted for Jan 2..8 only.
    assert row.cust_n.item() == 1 and row.cust_p50.item() == pytest.approx(0.7)
    jan8 = table[(table.customer_id == "c1") & (table.day == pd.Timestamp("2026-01-08").date())]
    assert jan8.cust_n.item() == 2 and jan8.cust_p50.item() == pytest.approx(0.4)
    assert set(table[table.customer_id == "c2"].cust_n) == {1}


def test_percentiles_are_interpolated_quantiles():
    rows = [(f"v{i}", "c", T("2026-01-01"), T("2026-01-01 05:00"), i / 10) for i in range(11)]
    table = customer_percentiles(_vms(rows), 7, [50, 80, 90])
    r = table.iloc[0]
    assert (r.cust_p50, r.cust_p80, r.cust_p90) == pytest.approx((0.5, 0.8, 0.9))


@pytest.mark.parametrize("kw,match", [({"as_of": "2026-13-40"}, "YYYY-MM-DD"),
                                      ({"as_of": "2026-01-01", "window_days": 0}, "window_days"),
                                      ({"as_of": "2026-01-01", "percentiles": (50, 100)}, "percentiles")])
def test_bad_feature_params_are_named(kw, match):
    from pond.core.errors import ConfigError
    from pond.features.build import FeatureParams
    with pytest.raises(ConfigError, match=match):
        FeatureParams(**kw)
