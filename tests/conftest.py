from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from telemetry.fleet import FleetParams, LabParams, generate
from telemetry.io import read_tables

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
SMALL_FLEET = FleetParams(seed=5, n_days=12, vms_per_day=300, n_customers=120, new_customers_per_day=2)


@pytest.fixture(scope="session")
def small_raw(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("raw") / "raw"
    generate(LabParams(seed=5, repetitions=2), SMALL_FLEET, out)
    return out


@pytest.fixture(scope="session")
def small_tables(small_raw) -> dict[str, pd.DataFrame]:
    return read_tables(small_raw)


@pytest.fixture()
def tables(small_tables) -> dict[str, pd.DataFrame]:
    return {k: v.copy() for k, v in small_tables.items()}
