"""The VM tables as datasets partitioned by creation day, read back as the same tables."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from pond.telemetry.fleet import LabParams, generate
from pond.telemetry.io import (
    CLUSTER_KEY,
    DAY_KEY,
    cluster_bytes,
    find_table,
    read_raw,
    read_tables,
    vm_partitions,
    write_tables,
)
from tests.conftest import SMALL_FLEET


@pytest.fixture(scope="module")
def partitioned_raw(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("raw_part") / "raw"
    generate(LabParams(seed=5, repetitions=2), SMALL_FLEET, out, partitioned=True)
    return out


def _by_id(df: pd.DataFrame, key: str) -> pd.DataFrame:
    return df.sort_values(key, kind="stable").reset_index(drop=True)


def test_generate_writes_one_folder_per_creation_day(partitioned_raw, small_tables):
    days = sorted(p.name for p in (partitioned_raw / "vms").iterdir())
    created = small_tables["vms"].created_at.dt.tz_convert("UTC").dt.strftime("%Y-%m-%d")
    assert days == [f"{DAY_KEY}={d}" for d in sorted(created.unique())]
    assert sorted(p.name for p in (partitioned_raw / "vm_counters").iterdir()) == days
    assert not (partitioned_raw / "vms.parquet").exists()


def test_each_day_has_one_folder_per_cluster_holding_its_vms_and_their_counters(partitioned_raw, small_tables):
    vms = small_tables["vms"]
    cluster_of = vms.set_index("vm_id").cluster_id
    for table in ("vms", "vm_counters"):
        files = sorted((partitioned_raw / table).rglob("*.parquet"))
        assert files and all(f.parent.name.startswith(f"{CLUSTER_KEY}=") for f in files)
        for f in files:
            rows = pd.read_parquet(f, columns=["vm_id"]).vm_id
            assert set(cluster_of[rows]) == {f.parent.name.split("=", 1)[1]}, f
            assert (f.parent.parent.name.split("=", 1)[1] ==
                    vms.set_index("vm_id").created_at[rows].dt.strftime("%Y-%m-%d")).all()
    sizes = cluster_bytes(partitioned_raw / "vms")
    assert set(sizes) == set(vms.cluster_id) and sum(sizes.values()) == sum(
        f.stat().st_size for f in (partitioned_raw / "vms").rglob("*.parquet"))
    assert cluster_bytes(find_table(partitioned_raw, "workloads")) == {}
    # a reader that infers the folders' keys (pandas on the folder) reads it too, the folder beside the column
    inferred = pd.read_parquet(partitioned_raw / "vms")
    assert len(inferred) == len(vms) and (inferred.cluster.astype(str) == inferred.cluster_id).all()


NAMES = ["us/east 1", "A", "a", "x" * 256, "%41", "ü-1", "..", "k=v"]


def test_any_cluster_name_gets_a_folder_of_its_own(tmp_path, small_tables):
    """Foreign cluster names: slashes, percent signs, names equal but for case (one folder each on a
    file system that ignores case), names longer than a file name may be; the rows read back as written."""
    tables = {k: v.copy() for k, v in small_tables.items()}
    vms = tables["vms"]
    vms["cluster_id"] = pd.array([NAMES[i % len(NAMES)] for i in range(len(vms))], dtype="string")
    write_tables(tmp_path / "raw", tables, partitioned=True)
    folders = {f.parent.name for f in (tmp_path / "raw" / "vms").rglob("*.parquet")}
    assert len(folders) == len(NAMES) == len({f.casefold() for f in folders})
    assert max(len(f.encode()) for f in folders) < 160
    back = read_tables(tmp_path / "raw")
    for name in ("vms", "vm_counters"):
        pd.testing.assert_frame_equal(_by_id(back[name], "vm_id"), _by_id(tables[name], "vm_id"))
    named = set(cluster_bytes(tmp_path / "raw" / "vms"))
    assert named & set(NAMES) == {"us/east 1", "%41", "ü-1", "..", "k=v"}   # the rest carry a suffix


def test_partitioned_tables_equal_the_single_files(partitioned_raw, small_tables):
    part = read_tables(partitioned_raw)
    for name, key in (("vms", "vm_id"), ("vm_counters", "vm_id")):
        pd.testing.assert_frame_equal(_by_id(part[name], key), _by_id(small_tables[name], key))
    for name in ("workloads", "slowdowns"):
        pd.testing.assert_frame_equal(part[name], small_tables[name])


def test_a_day_range_reads_only_those_days(partitioned_raw, small_tables):
    vms = small_tables["vms"]
    day = vms.created_at.dt.tz_convert("UTC").dt.strftime("%Y-%m-%d")
    lo, hi = sorted(day.unique())[2], sorted(day.unique())[4]
    got = read_raw(find_table(partitioned_raw, "vms"), "vms", days=(lo, hi))
    want = vms[(day >= lo) & (day <= hi)]
    assert set(got.vm_id) == set(want.vm_id) and len(got) == len(want)
    assert list(got.columns) == list(vms.columns)


def test_a_day_without_any_optional_value_keeps_its_type(tmp_path, small_tables):
    tables = {k: v.copy() for k, v in small_tables.items()}
    first = tables["vms"].created_at.dt.date == tables["vms"].created_at.dt.date.min()
    tables["vms"].loc[first, "workload_id"] = None      # that day's file has no workload_id at all
    write_tables(tmp_path / "raw", tables, partitioned=True)
    back = read_tables(tmp_path / "raw")
    pd.testing.assert_frame_equal(_by_id(back["vms"], "vm_id"), _by_id(tables["vms"], "vm_id"))


def test_only_the_fleet_tables_may_be_datasets(tmp_path):
    (tmp_path / "workloads").mkdir()
    (tmp_path / "vms").mkdir()
    assert find_table(tmp_path, "workloads") is None
    assert find_table(tmp_path, "vms") == tmp_path / "vms"


def test_features_on_the_partitioned_layout_equal_the_single_files(tmp_path, partitioned_raw, small_bundle):
    from tests.conftest import run_pond
    assert run_pond(["--quiet", "--params", str(small_bundle / "params.yaml"), "features", "--raw", str(partitioned_raw),
                 "--out", str(tmp_path / "features"), "--metrics", str(tmp_path / "f.json")]) == 0
    # within a day the dataset's rows come cluster by cluster, so the VMs' order differs; each VM's
    # features, and the snapshot, do not
    for name, key in (("vm_features.parquet", "vm_id"), ("snapshot/workload_history.parquet", None),
                      ("snapshot/customer_percentiles.parquet", None)):
        got, want = (pd.read_parquet(d / "features" / name) for d in (tmp_path, small_bundle))
        if key:
            got, want = _by_id(got, key), _by_id(want, key)
        pd.testing.assert_frame_equal(got, want, check_exact=True)


def test_read_days_returns_those_days_and_skips_the_other_row_groups(tmp_path, small_bundle):
    import datetime

    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    from pond.telemetry.io import read_days

    vmf = pd.read_parquet(small_bundle / "features" / "vm_features.parquet")
    path = tmp_path / "vm_features.parquet"
    vmf.to_parquet(path, index=False, row_group_size=100)
    first, last = sorted(vmf.day.unique())[3:5]
    got = read_days(path, first, last)
    expected = vmf[(vmf.day >= first) & (vmf.day <= last)].reset_index(drop=True)
    pd.testing.assert_frame_equal(got, expected)   # the same rows, in file order, every column
    assert read_days(path, first, last, columns=["vm_id"]).vm_id.tolist() == expected.vm_id.tolist()
    assert read_days(path, datetime.date(1999, 1, 1), datetime.date(1999, 1, 2)).empty
    # the rows come from the few row groups the day's statistics allow, not from all of them
    where = (ds.field("day") >= first) & (ds.field("day") <= last)
    kept = [g for f in ds.dataset(path).get_fragments() for g in f.split_by_row_group(filter=where)]
    assert pq.ParquetFile(path).metadata.num_row_groups > 3 * len(kept) and len(kept) >= 1


def test_a_counter_goes_to_its_vms_partition_and_one_of_no_vm_to_none():
    vms = pd.DataFrame({"vm_id": ["a", "b", "c"], "cluster_id": ["k1", "k2", "k1"],
                        "created_at": pd.to_datetime(["2026-01-01 23:00", "2026-01-02 01:00", "2026-01-03 00:00"],
                                                     utc=True)})
    where = vm_partitions(vms)
    ids = pd.Series(["c", "zz", "a", "c"], index=[7, 8, 9, 10])
    for of in (where.of(ids, vms), where.of(ids, pd.Index(vms["vm_id"]))):   # the table, or its ids indexed once
        assert of.day.tolist()[::2] == ["2026-01-03", "2026-01-01"] and of.day.tolist()[3] == "2026-01-03"
        assert pd.isna(of.day.iloc[1]) and pd.isna(of.cluster.iloc[1])
        assert of.cluster.tolist()[::2] == ["k1", "k1"] and of.cluster.dtype == "string"
