from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from fastapi.testclient import TestClient

from pond.models.bundle import BundlePaths
from pond.serving.app import create_app
from pond.serving.engine import Engine
from pond.serving.settings import Settings
from tests.conftest import SMALL_AS_OF


def bundle_paths(wd: Path) -> BundlePaths:
    return BundlePaths(wd / "policy.json", wd / "li", wd / "um", wd / "features" / "snapshot", wd / "monitor")


def settings_for(wd: Path, **kw) -> Settings:
    p = bundle_paths(wd)
    return Settings(policy=p.policy, li_dir=p.li_dir, um_dir=p.um_dir, snapshot_dir=p.snapshot_dir,
                    monitor_dir=p.monitor_dir,
                    **{"reload_interval_s": 0, **kw})


@pytest.fixture(scope="session")
def engine(small_bundle) -> Engine:
    return Engine.load(bundle_paths(small_bundle))


@pytest.fixture(scope="session")
def next_day_vms(small_bundle) -> pd.DataFrame:
    """The VMs of the day after the as-of day, as evaluate sees them."""
    vmf = pd.read_parquet(small_bundle / "features" / "vm_features.parquet")
    day = (pd.Timestamp(SMALL_AS_OF) + pd.Timedelta(days=1)).date()
    return vmf[vmf.day == day].reset_index(drop=True)


@pytest.fixture()
def client(small_bundle):
    with TestClient(create_app(settings_for(small_bundle))) as c:
        yield c


def request_of(row) -> dict:
    return {"vm_id": row.vm_id, "customer_id": row.customer_id, "vm_type": row.vm_type, "vcpus": int(row.vcpus),
            "memory_gb": float(row.memory_gb), "os": row.os, "region": row.region, "cluster_id": row.cluster_id}
