"""The dask engine's `features` moves the fleet through files (features.shuffle), run here
with an in-process runner: the same tables as the local engine, errors that name the row, and a
merge that keeps the local row order."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from pond.core.errors import ConfigError, ContractError
from pond.core.params import Params
from pond.features.build import facts, summary, vm_features
from pond.features.partitioned import first_events_day, partitioned_features
from pond.features.shuffle import Unit, merge_in_order, split
from pond.telemetry.fleet import LabParams, generate
from pond.telemetry.io import DAY_KEY, counters_source, read_tables, write_tables
from tests.conftest import SMALL_FLEET, small_params


def _here(fn, tasks):
    return [fn(*t) for t in tasks]


@pytest.fixture(scope="module")
def partitioned_raw(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("raw_shuffle") / "raw"
    generate(LabParams(seed=5, repetitions=2), SMALL_FLEET, out, partitioned=True)
    return out


@pytest.fixture(scope="module")
def fp():
    return Params(**small_params()).features


def _run(raw: Path, tmp: Path, fp, events: list[str], partitions: int = 3):
    out = tmp / "vm_features.parquet"
    done = partitioned_features(_here, raw, counters_source(raw), events, fp, partitions, tmp / "scratch", out, 1000)
    return done, out


def _events(raw: Path) -> list[str]:
    cols = pq.read_schema(next((raw / "vm_counters").rglob("*.parquet"))).names
    return [c for c in cols if c != "vm_id"]


def test_merge_keeps_the_row_order_and_types_an_all_null_column(tmp_path):
    rows = [np.array([0, 3, 4, 9]), np.array([1, 2, 8]), np.array([5, 6, 7])]
    for i, r in enumerate(rows):
        b = [None] * len(r) if i == 1 else [f"s{x}" for x in r]    # part 1 has only nulls in b
        pd.DataFrame({"a": r * 10, "b": b}).to_parquet(tmp_path / f"p{i}.parquet", index=False)
    n = merge_in_order([(tmp_path / f"p{i}.parquet", r) for i, r in enumerate(rows)], tmp_path / "out.parquet", 4)
    got = pd.read_parquet(tmp_path / "out.parquet")
    assert n == 10 and got["a"].tolist() == list(range(0, 100, 10))
    assert got["b"].fillna("-").tolist() == ["s0", "-", "-", "s3", "s4", "s5", "s6", "s7", "-", "s9"]
    meta = pq.ParquetFile(tmp_path / "out.parquet").metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [4, 4, 2]


def test_partitions_give_the_local_tables(tmp_path, partitioned_raw, fp):
    fp = fp.model_copy(update={"history_days": 3})    # so that the 12-day fleet has days before the history
    events = _events(partitioned_raw)
    done, out = _run(partitioned_raw, tmp_path, fp, events)
    vms = read_tables(partitioned_raw, ["vms"])["vms"]
    local = vm_features(vms, counters_source(partitioned_raw), fp)
    local.to_parquet(tmp_path / "local.parquet", index=False)
    pd.testing.assert_frame_equal(pd.read_parquet(out), pd.read_parquet(tmp_path / "local.parquet"), check_exact=True)
    assert done.stray_counters == 0
    assert summary(done.facts, done.customers, done.history, fp.customer_columns) == \
        summary(facts(local, fp.customer_columns), done.customers, done.history, fp.customer_columns)
    # counter events are copied only for the days the snapshot's history can use; which VMs have counters, for all
    scratch = tmp_path / "scratch"
    units_with_events = {f.name for f in scratch.glob("counters/*/*.parquet")}
    units_with_ids = {f.name for f in scratch.glob("has_counters/*/*.parquet")}
    days = sorted(p.name.split("=")[1] for p in (partitioned_raw / "vms").iterdir())
    first = first_events_day(fp).isoformat()
    assert units_with_events == {f"u{i:06d}.parquet" for i, d in enumerate(days) if d >= first}
    assert units_with_events < units_with_ids


def _copy(src: Path, dst: Path) -> list[Path]:
    """A copy of the partitioned fleet; its vms day folders, in order."""
    write_tables(dst, read_tables(src), partitioned=True)
    return sorted((dst / "vms").iterdir())


def _file(day: Path, last: bool = False) -> Path:
    """A day folder's first (or last) file, whatever cluster folder it is in."""
    return sorted(day.rglob("*.parquet"))[-1 if last else 0]


def test_an_id_on_two_days_is_named(tmp_path, partitioned_raw, fp):
    days = _copy(partitioned_raw, tmp_path / "raw")
    first = pd.read_parquet(_file(days[0]))
    last = pd.read_parquet(_file(days[-1], last=True))
    twin = first.vm_id.iloc[0]
    assert last.customer_id.iloc[-1] != first.customer_id.iloc[0]
    last.loc[last.index[-1], "vm_id"] = twin          # a VM of another customer, days later
    last.to_parquet(_file(days[-1], last=True), index=False)
    with pytest.raises(ContractError, match="duplicate ids") as e:
        _run(tmp_path / "raw", tmp_path, fp, _events(partitioned_raw))
    assert e.value.table == "vms" and e.value.column == "vm_id" and e.value.rows == [twin]


def test_a_bad_row_is_named_by_its_id(tmp_path, partitioned_raw, fp):
    tables = read_tables(partitioned_raw)
    bad = tables["vms"].vm_id.iloc[-5]
    tables["vms"].loc[tables["vms"].vm_id == bad, "memory_gb"] = -4.0
    write_tables(tmp_path / "raw", tables, partitioned=True)
    with pytest.raises(ContractError) as e:
        _run(tmp_path / "raw", tmp_path, fp, _events(partitioned_raw))
    assert e.value.table == "vms" and e.value.column == "memory_gb" and e.value.rows == [bad]


def test_counters_outside_their_vms_day_are_counted(tmp_path, partitioned_raw, fp):
    raw = tmp_path / "raw"
    _copy(partitioned_raw, raw)
    days = sorted((raw / "vm_counters").iterdir())
    fa, fb = _file(days[0]), _file(days[1])
    a, b = pd.read_parquet(fa), pd.read_parquet(fb)
    pd.concat([b, a.head(2)], ignore_index=True).to_parquet(fb, index=False)
    a.iloc[2:].to_parquet(fa, index=False)
    assert days[0].name.startswith(DAY_KEY)
    done, _ = _run(raw, tmp_path, fp, _events(partitioned_raw))
    assert done.stray_counters == 2


def test_files_of_any_name_are_read_as_the_local_engine_reads_them(tmp_path, partitioned_raw, fp):
    """A foreign export's day folders may hold files without a .parquet suffix: no VM is left out."""
    days = _copy(partitioned_raw, tmp_path / "raw")
    f = _file(days[3])
    f.rename(f.with_suffix(""))
    _done, out = _run(tmp_path / "raw", tmp_path, fp, _events(partitioned_raw))
    vms = read_tables(tmp_path / "raw", ["vms"])["vms"]
    assert len(pd.read_parquet(out)) == len(vms) == len(read_tables(partitioned_raw, ["vms"])["vms"])
    assert pd.read_parquet(out)["vm_id"].tolist() == vms["vm_id"].tolist()


def test_a_worker_that_cannot_see_the_raw_tables_says_how_to_fix_it(tmp_path):
    """A remote worker gets the paths of the stage's machine: the error names the file and the fixes,
    not a parse failure."""
    unit = Unit(0, (tmp_path / "elsewhere" / "vms.parquet",), (tmp_path / "elsewhere" / "vm_counters.parquet",))
    with pytest.raises(ConfigError, match=r"cannot see .*elsewhere/vms.parquet \(and 1 more files\).*POND_SCRATCH"):
        split(unit, tmp_path / "scratch", 4)
    assert not (tmp_path / "scratch").exists()


def test_relative_paths_reach_workers_in_another_directory(tmp_path, partitioned_raw, fp, monkeypatch):
    """`dvc repro` gives relative paths (--raw data/raw, the output's temporary folder under data/); a
    remote worker's working directory is its own. Before, the workers wrote the partitions under their
    own directory and the stage failed to find them."""
    import contextlib
    import shutil

    shutil.copytree(partitioned_raw, tmp_path / "repo" / "raw")
    (tmp_path / "worker").mkdir()
    monkeypatch.chdir(tmp_path / "repo")

    def elsewhere(fn, tasks):
        with contextlib.chdir(tmp_path / "worker"):
            return [fn(*t) for t in tasks]

    events = _events(partitioned_raw)
    done = partitioned_features(elsewhere, Path("raw"), counters_source(Path("raw")), events, fp, 3, Path("scratch"),
                                tmp_path / "rel.parquet", 1000)
    _, want = _run(partitioned_raw, tmp_path / "abs", fp, events)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "rel.parquet"), pd.read_parquet(want), check_exact=True)
    assert done.stray_counters == 0 and list((tmp_path / "worker").iterdir()) == []


def test_spread_puts_the_largest_group_into_the_least_loaded_partition():
    from pond.features.shuffle import spread
    sizes = {"a": 10, "b": 7, "c": 5, "d": 3}
    assert spread(sizes, 2) == {"a": 0, "b": 1, "c": 1, "d": 0}
    assert spread(sizes, 6) == {"a": 0, "b": 1, "c": 2, "d": 3}     # more partitions than groups: one each
    assert spread({}, 4) == {} and spread(sizes, 0) == {n: 0 for n in sizes}


def test_a_group_lands_in_one_partition_named_or_not():
    from pond.features.shuffle import group_partition
    values = pd.Series(["a", "b", "z", "a", "z", "b", "y"], dtype="string")
    part = group_partition(values, 4, {"a": 3, "b": 0})
    assert part[0] == part[3] == 3 and part[1] == part[5] == 0
    assert part[2] == part[4] == group_partition(values, 4)[2]     # not named: its hash, in every task
    assert group_partition(values.iloc[::-1].reset_index(drop=True), 4, {"a": 3, "b": 0}).tolist() == part[::-1].tolist()
