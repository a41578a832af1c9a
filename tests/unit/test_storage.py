"""Storage URLs (telemetry.storage). A URL is read through its fsspec filesystem and gives
the tables a local path gives; a missing scheme package or an unreachable store is a clear error.
The in-memory filesystem (memory://) stands in for a bucket: the same UPath code serves s3:// (the
S3 runs are in tests/data/test_storage_urls.py)."""

from __future__ import annotations

import uuid
from pathlib import Path

import fsspec
import pandas as pd
import pytest

from pond.core.errors import ConfigError, ContractError
from pond.telemetry.io import cluster_bytes, day_files, find_table, read_raw, read_tables, table_columns, write_tables
from pond.telemetry.storage import is_url, location, remove_tree, storage_failure
from tests.conftest import run_pond


@pytest.fixture()
def memory_url():
    """A fresh folder of the in-memory filesystem, removed afterwards."""
    url = f"memory://pond-test-{uuid.uuid4().hex}"
    yield url
    remove_tree(location(url))


def _put(local: Path, url: str) -> None:
    fsspec.filesystem("memory").put(str(local), url.split("://", 1)[1], recursive=True)


@pytest.mark.parametrize("value, url", [("s3://bucket/raw", True), ("gs://b/x", True), ("file:///tmp/raw", True),
                                        ("memory://x", True), ("data/raw", False), ("/tmp/raw", False),
                                        ("C:\\data\\raw", False), ("s3:/bucket", False)])
def test_a_url_has_a_scheme_and_two_slashes(value, url):
    assert is_url(value) is url
    assert is_url(Path("data/raw")) is False


def test_a_local_path_stays_a_path():
    assert type(location("data/raw")) is type(Path("data/raw"))
    assert location(Path("x")) == Path("x")


def test_a_scheme_without_its_package_is_named():
    with pytest.raises(ConfigError, match=r"nosuch://.*install the fsspec package of 'nosuch://'"):
        location("nosuch://bucket/raw")


def test_the_cli_refuses_a_url_it_cannot_open(capsys):
    with pytest.raises(SystemExit) as exit_:
        run_pond(["validate", "nosuch://bucket/raw"])
    assert exit_.value.code == 2 and "install the fsspec package of 'nosuch://'" in capsys.readouterr().err


@pytest.mark.parametrize("partitioned", [False, True], ids=["single files", "partitioned by day and cluster"])
def test_tables_at_a_url_are_the_local_tables(tmp_path, small_tables, memory_url, partitioned):
    write_tables(tmp_path / "raw", small_tables, partitioned=partitioned)
    _put(tmp_path / "raw", memory_url)
    here, there = read_tables(tmp_path / "raw"), read_tables(memory_url)
    for name in here:
        pd.testing.assert_frame_equal(there[name], here[name], check_exact=True)
    vms_here, vms_there = find_table(tmp_path / "raw", "vms"), find_table(location(memory_url), "vms")
    assert is_url(vms_there) and table_columns(vms_there) == table_columns(vms_here)
    if partitioned:
        local_days, url_days = day_files(vms_here), day_files(vms_there)
        assert list(url_days) == list(local_days)
        assert [[f.name for f in fs] for fs in url_days.values()] == [[f.name for f in fs] for fs in local_days.values()]
        assert all(is_url(f) for fs in url_days.values() for f in fs)
        assert cluster_bytes(vms_there) == cluster_bytes(vms_here) and len(cluster_bytes(vms_here)) > 1
        day = list(local_days)[3]
        pd.testing.assert_frame_equal(read_raw(vms_there, "vms", days=(day, day)), read_raw(vms_here, "vms", days=(day, day)))


def test_a_broken_file_at_a_url_names_its_table(tmp_path, small_tables, memory_url):
    write_tables(tmp_path / "raw", small_tables)
    (tmp_path / "raw" / "slowdowns.parquet").write_bytes(b"not parquet")
    _put(tmp_path / "raw", memory_url)
    with pytest.raises(ContractError, match=r"table 'slowdowns'.*cannot read memory://.*slowdowns.parquet"):
        read_tables(memory_url)


def test_a_missing_table_at_a_url_is_named(tmp_path, small_tables, memory_url):
    write_tables(tmp_path / "raw", {k: v for k, v in small_tables.items() if k != "workloads"})
    _put(tmp_path / "raw", memory_url)
    with pytest.raises(ContractError, match=r"table 'workloads'.*no workloads.parquet or workloads.csv in memory://"):
        read_tables(memory_url)


def test_remove_tree_removes_a_url_folder_and_tolerates_a_missing_one(memory_url):
    fs = fsspec.filesystem("memory")
    fs.pipe(memory_url.split("://", 1)[1] + "/a/b.parquet", b"x")
    remove_tree(location(memory_url))
    assert not location(memory_url).exists()
    remove_tree(location(memory_url))


def test_an_unreachable_store_is_a_storage_failure_and_other_errors_are_not():
    botocore = pytest.importorskip("botocore.exceptions")
    why = storage_failure(botocore.NoCredentialsError())
    assert why.startswith("storage unreachable (NoCredentialsError: Unable to locate credentials)")
    assert "AWS_ACCESS_KEY_ID" in why and "every Dask worker" in why
    assert storage_failure(ValueError("x")) is None and storage_failure(OSError("disk")) is None


def test_access_denied_is_a_storage_failure_through_its_cause():
    """s3fs turns botocore's ClientError into a PermissionError raised from it: the chain is read."""
    botocore = pytest.importorskip("botocore.exceptions")
    cause = botocore.ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "HeadObject")
    try:
        raise PermissionError("Access Denied") from cause
    except PermissionError as exc:
        denied = exc
    assert storage_failure(denied).startswith("storage unreachable (PermissionError: Access Denied)")
    assert storage_failure(PermissionError("local file")) is None


def test_access_denied_while_reading_a_table_is_not_called_a_broken_file(tmp_path, small_tables, memory_url,
                                                                         monkeypatch, capsys):
    """A table the store refuses to hand over is a storage failure (check the credentials), not
    "the file cannot be read" (export it again): read_raw lets it through to the CLI unchanged."""
    botocore = pytest.importorskip("botocore.exceptions")
    write_tables(tmp_path / "raw", small_tables)
    _put(tmp_path / "raw", memory_url)

    def denied(*args, **kwargs):
        cause = botocore.ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "GetObject")
        raise PermissionError("Access Denied") from cause

    monkeypatch.setattr(pd, "read_parquet", denied)
    assert run_pond(["validate", memory_url]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pond validate: error: storage unreachable (PermissionError: Access Denied)")
    assert "cannot read" not in err


def test_an_unreachable_endpoint_exits_2_naming_it(monkeypatch, capsys):
    pytest.importorskip("s3fs")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")     # the discard port: nothing listens
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    fsspec.filesystem("s3").clear_instance_cache()
    assert run_pond(["validate", f"s3://pond-{uuid.uuid4().hex[:8]}/raw"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pond validate: error: storage unreachable (EndpointConnectionError") and "127.0.0.1:9" in err
