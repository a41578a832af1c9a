"""The raw tables in a bucket (s3:// through s3fs) and the dask engine's scratch folder in
one. An S3 server (moto) stands in for the store; the dask workers are other processes and reach it
as a real cluster's would, through the environment. Every run must give the local path's tables."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd
import pytest
import yaml

from pond.telemetry.io import read_tables, write_tables
from tests.conftest import SMALL_GRID, run_pond, small_params

pytestmark = pytest.mark.slow
OUTPUTS = ("vm_features.parquet", "snapshot/customer_percentiles.parquet", "snapshot/workload_history.parquet",
           "snapshot/request_shapes.parquet", "workload_features.parquet")


@pytest.fixture(scope="module")
def s3(tmp_path_factory, small_raw):
    """An S3 server with bucket ``raw`` (the small fleet as single files, and partitioned by day and cluster) and
    an empty bucket ``scratch``; the environment points every client (and worker) at it."""
    moto_server = pytest.importorskip("moto.server")
    s3fs = pytest.importorskip("s3fs")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    with pytest.MonkeyPatch.context() as mp:
        for k, v in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
                     "AWS_ENDPOINT_URL": f"http://{host}:{port}"}.items():
            mp.setenv(k, v)
        mp.delenv("AWS_PROFILE", raising=False)
        s3fs.S3FileSystem.clear_instance_cache()
        fs = s3fs.S3FileSystem()
        part = tmp_path_factory.mktemp("part") / "raw"
        write_tables(part, read_tables(small_raw, validate=False), partitioned=True)
        fs.mkdir("raw")
        fs.mkdir("scratch")
        fs.put(f"{small_raw}/", "raw/single/", recursive=True)
        fs.put(f"{part}/", "raw/part/", recursive=True)
        yield fs
        s3fs.S3FileSystem.clear_instance_cache()
    server.stop()


def _params(wd: Path, backend: str) -> Path:
    p = small_params()
    p["engine"] = {"backend": backend, "workers": 2, "worker_memory": "1GiB", "partitions": 5}
    p["simulate"].update(SMALL_GRID)
    wd.mkdir(parents=True, exist_ok=True)
    (wd / "params.yaml").write_text(yaml.safe_dump(p))
    return wd / "params.yaml"


def _features(wd: Path, raw: str, backend: str) -> tuple[Path, str]:
    assert run_pond(["--quiet", "--params", str(_params(wd, backend)), "features", "--raw", raw,
                 "--out", str(wd / "features"), "--metrics", str(wd / "f.json")]) == 0
    return wd / "features", (wd / "f.json").read_text()


@pytest.fixture(scope="module")
def local(tmp_path_factory, small_raw) -> tuple[Path, str]:
    return _features(tmp_path_factory.mktemp("local"), str(small_raw), "local")


def _same(got: tuple[Path, str], want: tuple[Path, str], layout: str = "single") -> None:
    """The same outputs; from the partitioned layout a day's VMs come cluster by cluster, so the VM
    features are compared VM by VM (the snapshots do not depend on the order)."""
    for name in OUTPUTS:
        a, b = pd.read_parquet(got[0] / name), pd.read_parquet(want[0] / name)
        if layout == "part" and name == "vm_features.parquet":
            a, b = (x.sort_values("vm_id", kind="stable").reset_index(drop=True) for x in (a, b))
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert json.loads(got[1]) == json.loads(want[1])


@pytest.mark.parametrize("layout", ["single", "part"])
def test_local_engine_reads_a_bucket_as_a_folder(s3, local, tmp_path, layout):
    _same(_features(tmp_path, f"s3://raw/{layout}", "local"), local, layout)


def test_dask_workers_read_the_bucket_and_exchange_through_a_scratch_url(s3, local, tmp_path, monkeypatch, capsys):
    from pond.features import partitioned  # the stage calls it through its module, so the spy sees the call

    monkeypatch.setenv("POND_SCRATCH", "s3://scratch/nightly")
    exchanged, real = [], partitioned.partitioned_features

    def spy(*args):
        done = real(*args)
        s3.invalidate_cache()
        exchanged.extend(s3.find("scratch/nightly"))     # what the workers wrote, before it is removed
        return done

    monkeypatch.setattr(partitioned, "partitioned_features", spy)
    _same(_features(tmp_path, "s3://raw/part", "dask"), local, "part")
    assert "copied" not in capsys.readouterr().out       # the workers read the bucket in place
    assert any(f.endswith(".parquet") for f in exchanged)
    s3.invalidate_cache()
    assert s3.find("scratch") == []                      # and the scratch folder is gone


def test_local_raw_tables_are_copied_to_a_scratch_url_for_the_workers(s3, local, small_raw, tmp_path, monkeypatch,
                                                                       capsys):
    monkeypatch.setenv("POND_SCRATCH", "s3://scratch/nightly")
    monkeypatch.delenv("POND_QUIET", raising=False)
    _same(_features(tmp_path, str(small_raw), "dask"), local)
    assert "of raw tables to s3://scratch/nightly/features-" in capsys.readouterr().out
    assert s3.find("scratch") == []


def test_simulate_places_the_trace_on_workers_from_the_bucket_through_a_scratch_url(s3, small_raw, small_backtest,
                                                                                    tmp_path, monkeypatch):
    """The workers read the trace in the bucket and exchange its cluster partitions through the scratch
    URL (``simulator.trace``); the tables and metrics are the local engine's on the folder."""
    import pond.evaluation.replay as stage

    monkeypatch.setenv("POND_SCRATCH", "s3://scratch/sim")
    exchanged, real = [], stage.gather_window

    def spy(*args):
        s3.invalidate_cache()
        exchanged.extend(s3.find("scratch/sim"))         # what the split tasks wrote, before it is removed
        return real(*args)

    monkeypatch.setattr(stage, "gather_window", spy)
    outs = {}
    for backend, raw in (("local", str(small_raw)), ("dask", "s3://raw/single")):
        wd = tmp_path / backend
        assert run_pond(["--quiet", "--params", str(_params(wd, backend)), "simulate", "--raw", raw, "--nightly",
                     str(small_backtest), "--out", str(wd / "sim"), "--metrics", str(wd / "sim.json"),
                     "--plots", str(wd / "plots")]) == 0
        outs[backend] = wd
    pd.testing.assert_frame_equal(pd.read_csv(outs["dask"] / "sim" / "sizing_by_cluster.csv"),
                                  pd.read_csv(outs["local"] / "sim" / "sizing_by_cluster.csv"), check_exact=True)
    assert json.loads((outs["dask"] / "sim.json").read_text()) == json.loads((outs["local"] / "sim.json").read_text())
    assert any("/vms/p" in f for f in exchanged) and any("/ids/p" in f for f in exchanged)
    s3.invalidate_cache()
    assert s3.find("scratch") == []                      # the workers' copy of the trace is gone
    assert not list(tmp_path.glob("dask/.sim.*"))        # and nothing is left beside the output


def test_csv_tables_in_a_bucket_on_the_workers(s3, small_raw, tmp_path, monkeypatch):
    """A CSV export: the vms file is read by a worker from the bucket, the counters (CSV: read and
    validated by the stage) travel with the task; the tables equal the local engine's on the folder."""
    folder = tmp_path / "csv"
    folder.mkdir()
    for name, df in read_tables(small_raw, validate=False).items():
        df.to_csv(folder / f"{name}.csv", index=False)
    s3.put(f"{folder}/", "raw/csv/", recursive=True)
    monkeypatch.setenv("POND_SCRATCH", "s3://scratch/csv")
    _same(_features(tmp_path / "dask", "s3://raw/csv", "dask"), _features(tmp_path / "local", str(folder), "local"))


def test_validate_and_import_read_a_bucket(s3, small_raw, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)             # no params.yaml here: the tables alone, as a team's first try
    assert run_pond(["validate", "s3://raw/part"]) == 0
    assert run_pond(["import", "s3://raw/single", "--out", str(tmp_path / "imported")]) == 0
    got, want = read_tables(tmp_path / "imported"), read_tables(small_raw)
    for name in want:
        pd.testing.assert_frame_equal(got[name], want[name], check_exact=True)


def test_a_missing_bucket_is_named(s3, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run_pond(["import", "s3://no-such-bucket/raw", "--out", str(tmp_path / "imported")]) == 2
    assert capsys.readouterr().err == "pond import: error: s3://no-such-bucket/raw is not a directory of contract tables\n"
    assert not (tmp_path / "imported").exists()
