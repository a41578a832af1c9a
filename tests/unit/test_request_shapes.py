"""The request shapes the service predicts at load come only from VMs created before the snapshot."""

from __future__ import annotations

import pandas as pd
import pytest

from pond.core.errors import ConfigError
from pond.features.build import FeatureParams, request_shapes

T = lambda s: pd.Timestamp(s, tz="UTC")


def _vm(vm_id: str, customer: str, created: str, vm_type: str = "Standard_D2s_v3", cluster: str | None = "c0") -> dict:
    return {"vm_id": vm_id, "customer_id": customer, "vm_type": vm_type, "vcpus": 2, "memory_gb": 8.0,
            "os": "linux", "region": "r1", "cluster_id": cluster, "created_at": T(created)}


def test_shapes_are_counted_in_the_window_before_the_snapshot_only():
    vms = pd.DataFrame([
        _vm("a", "c1", "2026-01-10 05:00"), _vm("b", "c1", "2026-01-10 23:59"), _vm("c", "c1", "2026-01-04 00:00"),
        _vm("d", "c2", "2026-01-09 12:00", cluster=None),
        _vm("old", "c3", "2026-01-03 23:59"),             # before the 7-day window
        _vm("next", "c4", "2026-01-11 00:00"),            # the served day itself: unknown at the snapshot
        _vm("e", "c2", "2026-01-09 13:00", vm_type="Standard_E4s_v5"),
    ])
    shapes = request_shapes(vms, FeatureParams(as_of="2026-01-10", window_days=7))
    assert shapes["customer_id"].tolist() == ["c1", "c2", "c2"]     # most frequent first, then by shape
    assert shapes["vms"].tolist() == [3, 1, 1]
    assert shapes["vm_type"].tolist() == ["Standard_D2s_v3", "Standard_D2s_v3", "Standard_E4s_v5"]
    assert shapes["cluster_id"].isna().tolist() == [False, True, False]   # a missing cluster is its own shape
    assert not {"c3", "c4"} & set(shapes["customer_id"])


def test_shapes_are_capped_and_the_cap_is_checked():
    vms = pd.DataFrame([_vm(str(i), f"c{i % 5}", "2026-01-10 01:00") for i in range(20)])
    assert len(request_shapes(vms, FeatureParams(as_of="2026-01-10", request_shapes=3))) == 3
    with pytest.raises(ConfigError, match="features.request_shapes"):
        FeatureParams(as_of="2026-01-10", request_shapes=0)
