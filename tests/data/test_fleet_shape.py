"""generate.fleet.shape azure, the default: the public trace's sizes and lifetimes, with every existing
check of the fleet still holding; footprint, the shape before it, stays reachable."""

from __future__ import annotations

import pandas as pd
import pytest

from pond.core.params import FleetParams, LabParams
from pond.evaluation.calibration import fleet_checks, shape_checks
from pond.telemetry.fleet import generate
from pond.telemetry.io import read_tables

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("variant", ["pond", "walks"])
def test_the_azure_shape_follows_the_public_trace(tmp_path, variant):
    fleet = FleetParams(seed=42, n_days=14, vms_per_day=4000, n_customers=900, shape="azure")
    generate(LabParams(seed=42, repetitions=1), fleet, tmp_path / "raw", variant)
    vms = read_tables(tmp_path / "raw", ["vms"])["vms"]
    assert {c.name: round(c.value, 1) for c in shape_checks(vms) if not c.ok} == {}
    assert {c.name: round(c.value, 1) for c in fleet_checks(vms) if not c.ok} == {}   # Pond §3.2 still holds
    assert vms.vm_type.str.extract(r"Standard_([A-Z])(\d+)s_v")[1].astype(int).tolist() == vms.vcpus.tolist()


def test_the_footprint_shape_is_not_the_traces(small_tables):
    """The footprint shape (the unit tests' fleet, the older default): larger and longer-lived than Azure's."""
    failed = {c.name for c in shape_checks(small_tables["vms"]) if not c.ok}
    assert {"vms_with_2_vcpus_pct", "vms_up_to_8gb_pct", "life_under_30min_pct"} <= failed
    assert pd.Series(small_tables["vms"].memory_gb).mean() > 40
