"""`simulate`'s trace, placed by cluster partitions (the dask engine's way, run here with a
runner that calls each task in turn), is the trace placed whole: the same span, the same window's
VMs in the same order, on the same servers; and the checks the whole table gets still hold."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pond.core.errors import ConfigError, ContractError
from pond.core.params import LabParams, SimParams
from pond.simulator.trace import facts, gather_window, read_trace, span, split_trace, window_of
from pond.telemetry.fleet import generate
from pond.telemetry.io import read_tables, write_tables
from tests.conftest import SMALL_FLEET


def _here(fn, tasks):
    return [fn(*t) for t in tasks]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> dict[str, pd.DataFrame]:
    out = tmp_path_factory.mktemp("trace") / "raw"
    generate(LabParams(seed=5, repetitions=2), SMALL_FLEET, out)
    return read_tables(out, ["vms"])


def _both(tables: dict[str, pd.DataFrame], tmp: Path, partitions: int, pack_by: str = "cluster_id"):
    raw = tmp / "raw"
    write_tables(raw, tables, partitioned=True)              # one unit (split task) per creation day
    window = lambda s: (5 * 86400, 9 * 86400)
    whole = read_trace(raw)
    s = span([facts(whole, pack_by)])
    local = window_of(whole, s, window(s), SimParams(), pack_by)
    ps, parts = split_trace(_here, raw, pack_by, partitions, tmp / "scratch")
    return (s, local), (ps, gather_window(_here, tmp / "scratch", parts, ps, window(ps), SimParams(), pack_by)), parts


def _same(a, b) -> None:
    (s, w), (ps, pw) = a, b
    for k in ("rows", "t0", "last_created", "horizon", "last_end", "all_servers"):
        assert getattr(ps, k) == getattr(s, k), k
    assert ps.groups.equals(s.groups)
    pd.testing.assert_frame_equal(pw.vms, w.vms, check_exact=True)
    for name in ("start", "end"):
        np.testing.assert_array_equal(getattr(pw, name), getattr(w, name))
    for name in ("cluster", "host"):
        np.testing.assert_array_equal(getattr(pw.placement, name), getattr(w.placement, name))
    assert (pw.placement.sockets_per_host, pw.placement.assignment, pw.placement.oversized) == \
        (w.placement.sockets_per_host, w.placement.assignment, w.placement.oversized)


def test_the_scheduler_by_cluster_partitions_is_the_whole_traces(fleet, tmp_path):
    local, parts_answer, parts = _both(fleet, tmp_path, partitions=5)
    assert len(parts) > 1 and local[1].placement.assignment == "best_fit"      # simulate.packing's default
    assert 0 < len(local[1].vms) < local[0].rows                    # the window is a cut, not the trace
    _same(local, parts_answer)


def test_the_traces_own_servers_by_cluster_partitions(fleet, tmp_path):
    vms = fleet["vms"].copy()
    vms["server_id"] = "s" + (pd.Series(np.arange(len(vms))) % 17).astype(str)   # every VM names its server
    local, parts_answer, _ = _both({"vms": vms}, tmp_path, partitions=3)
    assert local[1].placement.assignment == "trace"
    _same(local, parts_answer)


def test_one_vm_without_a_server_means_the_scheduler_in_every_partition(fleet, tmp_path):
    vms = fleet["vms"].copy()
    vms["server_id"] = "s" + (pd.Series(np.arange(len(vms))) % 17).astype(str)
    vms.loc[vms.index[-1], "server_id"] = pd.NA                     # one VM, in one partition, names none
    local, parts_answer, _ = _both({"vms": vms}, tmp_path, partitions=3)
    assert local[1].placement.assignment == "best_fit"
    _same(local, parts_answer)


def test_grouped_by_region(fleet, tmp_path):
    local, parts_answer, _ = _both(fleet, tmp_path, partitions=2, pack_by="region")
    _same(local, parts_answer)


def test_an_id_in_two_days_is_named_as_the_whole_table_names_it(fleet, tmp_path):
    vms = fleet["vms"].copy()
    first, last = vms.index[0], vms.index[-1]
    assert vms.at[first, "created_at"].date() != vms.at[last, "created_at"].date()   # two units, two tasks
    vms.at[last, "vm_id"] = vms.at[first, "vm_id"]
    write_tables(tmp_path / "raw", {"vms": vms}, partitioned=True)
    with pytest.raises(ContractError, match="duplicate ids") as err:
        _, parts = split_trace(_here, tmp_path / "raw", "cluster_id", 4, tmp_path / "scratch")
        gather_window(_here, tmp_path / "scratch", parts, span([facts(vms, "cluster_id")]), (0, 10**9),
                      SimParams(), "cluster_id")
    assert vms.at[first, "vm_id"] in str(err.value)


def test_a_trace_without_rows_is_refused():
    with pytest.raises(ConfigError, match="no rows to replay"):
        span([facts(pd.DataFrame(columns=["vm_id", "cluster_id", "created_at", "deleted_at"]), "cluster_id")])


def test_the_span_of_pieces_is_the_span_of_the_whole(fleet):
    vms = fleet["vms"]
    whole = span([facts(vms, "cluster_id")])
    pieces = span([facts(vms.iloc[i::3], "cluster_id") for i in range(3)] + [facts(vms.iloc[:0], "cluster_id")])
    assert (pieces.rows, pieces.t0, pieces.last_created, pieces.horizon, pieces.last_end, pieces.all_servers) == \
        (whole.rows, whole.t0, whole.last_created, whole.horizon, whole.last_end, whole.all_servers)
    assert pieces.groups.equals(whole.groups) and list(whole.groups) == sorted(vms.cluster_id.unique())
    running = vms["deleted_at"].isna()
    assert running.any() and whole.last_end == whole.horizon        # running VMs end at the horizon
    done = span([facts(vms[~running], "cluster_id")])
    assert done.last_end == int((vms.loc[~running, "deleted_at"].max() - done.t0).total_seconds())


def test_a_trace_without_the_column_servers_are_grouped_by_is_named(fleet, tmp_path):
    """A trace with no cluster_id: the contract requires it, so the workers' split names it as the whole-table
    read does; the replay's own check names it and the alternative; packing by region still places it."""
    vms = fleet["vms"].drop(columns="cluster_id")
    with pytest.raises(ConfigError, match="has no column 'cluster_id' to group servers by; use cluster_id or region"):
        facts(vms, "cluster_id")
    write_tables(tmp_path / "raw", {"vms": vms}, partitioned=True)
    with pytest.raises(ContractError, match="table 'vms', column 'cluster_id': missing columns"):
        split_trace(_here, tmp_path / "raw", "cluster_id", 3, tmp_path / "scratch")
    placed = window_of(vms, span([facts(vms, "region")]), (0, 86400), SimParams(), "region")
    assert len(placed.vms) > 0 and (placed.placement.host >= 0).all()
