"""Issue 18: the dask engine gives the local engine's tables (features, simulate) on a LocalCluster."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from core.errors import ConfigError
from core.params import EngineParams, Params
from features.partitioned import customer_partition
from pipelines.cli import main
from tests.conftest import small_params

pytestmark = pytest.mark.slow


def _params(wd: Path, backend: str) -> Path:
    p = small_params()
    p["engine"] = {"backend": backend, "workers": 2, "worker_memory": "1GiB", "partitions": 5}
    wd.mkdir(parents=True, exist_ok=True)
    (wd / "params.yaml").write_text(yaml.safe_dump(p))
    return wd / "params.yaml"


def _features(raw: Path, wd: Path, backend: str) -> Path:
    assert main(["--quiet", "--params", str(_params(wd, backend)), "features", "--raw", str(raw),
                 "--out", str(wd / "features"), "--metrics", str(wd / "f.json")]) == 0
    return wd / "features"


@pytest.fixture(scope="module")
def both(tmp_path_factory, small_raw) -> tuple[Path, Path]:
    wd = tmp_path_factory.mktemp("engines")
    return _features(small_raw, wd / "local", "local"), _features(small_raw, wd / "dask", "dask")


@pytest.mark.parametrize("name", ["vm_features.parquet", "snapshot/customer_percentiles.parquet",
                                  "snapshot/workload_history.parquet", "snapshot/request_shapes.parquet",
                                  "workload_features.parquet"])
def test_features_are_identical(both, name):
    local, dask = both
    pd.testing.assert_frame_equal(pd.read_parquet(dask / name), pd.read_parquet(local / name), check_exact=True)


def test_feature_metrics_are_identical(both):
    local, dask = both
    assert json.loads((dask.parent / "f.json").read_text()) == json.loads((local.parent / "f.json").read_text())


def test_every_customer_lands_in_one_partition():
    ids = pd.Series(["c-1", "c-2", "c-1", "c-3", "c-2"])
    part = customer_partition(ids, 4)
    assert part[0] == part[2] and part[1] == part[4]
    assert ((part >= 0) & (part < 4)).all()
    assert (customer_partition(ids, 4) == part).all()     # stable across calls (and processes: a hash, not id())


def test_simulate_sizing_is_identical(tmp_path, small_raw, small_backtest):
    outs = {}
    for backend in ("local", "dask"):
        wd = tmp_path / backend
        params = _params(wd, backend)
        assert main(["--quiet", "--params", str(params), "simulate", "--raw", str(small_raw),
                     "--nightly", str(small_backtest), "--out", str(wd / "sim"), "--metrics", str(wd / "sim.json"),
                     "--plots", str(wd / "plots")]) == 0
        outs[backend] = wd
    pd.testing.assert_frame_equal(pd.read_csv(outs["dask"] / "sim" / "sizing_by_cluster.csv"),
                                  pd.read_csv(outs["local"] / "sim" / "sizing_by_cluster.csv"), check_exact=True)
    assert json.loads((outs["dask"] / "sim.json").read_text()) == json.loads((outs["local"] / "sim.json").read_text())


def test_engine_params_are_validated():
    with pytest.raises(ConfigError, match="engine.backend"):
        Params(**{**small_params(), "engine": {"backend": "spark"}})
    assert EngineParams().backend == "local"
