"""Importers of real formats, and `pond import` writing all or nothing."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from pond.core.errors import InputFormatError
from pond.telemetry.contract import validate_tables
from pond.telemetry.importers import azure_vms, parse_perf_stat, perf_workloads
from pond.telemetry.io import read_tables
from tests.conftest import FIXTURES, run_pond


def test_parse_perf_stat():
    text = ("# started on Sat Nov 21\n\n"
            "1000,,INST_RETIRED.ANY,100,100.00,,\n"
            "3000,,INST_RETIRED.ANY,100,100.00,,\n"
            "<not counted>,,UOPS_EXECUTED.X87,0,0.00,,\n"
            "42,,CPU_CLK_UNHALTED.THREAD,100,50.00,,\n")
    s = parse_perf_stat(text)
    assert s["INST_RETIRED.ANY"] == 2000.0 and s["CPU_CLK_UNHALTED.THREAD"] == 42.0
    assert math.isnan(s["UOPS_EXECUTED.X87"])


def test_perf_aliases_in_lower_case_become_the_contract_columns():
    """`perf list` shows aliases in lower case and perf prints them as typed (docs/your-telemetry.md, "Producing each table on Linux")."""
    text = ("12,,cycle_activity.stalls_l3_miss,100,100.00,,\n"
            "30,,CPU_CLK_UNHALTED.Thread,100,100.00,,\n"
            "7,,cpu/event=0x3c/,100,100.00,,\n"
            "5,,inst_retired.any:u,100,100.00,,\n")
    s = parse_perf_stat(text)
    assert s.to_dict() == {"CYCLE_ACTIVITY.STALLS_L3_MISS": 12.0, "CPU_CLK_UNHALTED.THREAD": 30.0,
                           "cpu/event=0x3c/": 7.0, "inst_retired.any:u": 5.0}


def test_parse_perf_stat_rejects_other_formats():
    with pytest.raises(InputFormatError, match="line 1"):
        parse_perf_stat("hello world\n", "run.txt")
    with pytest.raises(InputFormatError, match="not a number"):
        parse_perf_stat("12x,,INST_RETIRED.ANY,1,100,,\n")


def test_perf_runs_of_one_workload_are_summed():
    w = perf_workloads(FIXTURES / "perf", FIXTURES / "perf" / "meta.csv").set_index("workload_id")
    assert list(w.index) == ["redis/ycsb-a", "gapbs/bfs-road"]
    run1 = parse_perf_stat((FIXTURES / "perf" / "redis_ycsb-a.run1.csv").read_text())
    run2 = parse_perf_stat((FIXTURES / "perf" / "redis_ycsb-a.run2.csv").read_text())
    assert w.loc["redis/ycsb-a", "CPU_CLK_UNHALTED.THREAD"] == run1["CPU_CLK_UNHALTED.THREAD"] + run2["CPU_CLK_UNHALTED.THREAD"]
    assert w.loc["redis/ycsb-a", "workload_class"] == "redis"


def test_azure_vmtable():
    vms = azure_vms(FIXTURES / "azure" / "vmtable.csv")
    assert len(vms) == 4 and vms.untouched_fraction.isna().all()
    assert vms.vcpus.tolist() == [1, 2, 4, 32] and vms.memory_gb.tolist() == [2.0, 4.0, 8.0, 96.0]
    assert vms.created_at.iloc[2] == pd.Timestamp("2019-01-02", tz="UTC")
    assert vms.vm_type.iloc[1] == "azure_Interactive_2c_4g"


def test_azure_vmtable_compressed_or_at_a_url_is_the_plain_file(tmp_path):
    """The public dataset ships vmtable.csv.gz (it used to fail on the header sniff: UnicodeDecodeError)."""
    import gzip
    import uuid

    import fsspec

    from pond.telemetry.storage import location, remove_tree

    plain = FIXTURES / "azure" / "vmtable.csv"
    packed = tmp_path / "vmtable.csv.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    url = f"memory://pond-azure-{uuid.uuid4().hex}"
    fsspec.filesystem("memory").put(str(packed), url.split("://", 1)[1] + "/vmtable.csv.gz")
    try:
        for source in (packed, location(f"{url}/vmtable.csv.gz")):
            pd.testing.assert_frame_equal(azure_vms(source), azure_vms(plain))
    finally:
        remove_tree(location(url))


def _vmtable_with(tmp_path, row: int, field: int | None, value: str | None) -> str:
    """The fixture's vmtable with one field of one row changed (``field`` None: every row cut to 9 fields)."""
    lines = (FIXTURES / "azure" / "vmtable.csv").read_text().splitlines()
    rows = [line.split(",") for line in lines]
    if field is None:
        rows = [r[:9] for r in rows]
    else:
        rows[row][field] = value
    (tmp_path / "vmtable.csv").write_text("\n".join(",".join(r) for r in rows) + "\n")
    return str(tmp_path / "vmtable.csv")


@pytest.mark.parametrize("row, field, value, why", [
    (1, 3, "abc", "column vmcreated must be seconds from the trace's start; rows ['4WstS91M"),
    (2, 4, "x", "column vmdeleted must be seconds"),
    (0, None, None, "column vmcorecountbucket is empty in every row (its rows have fewer than the 11 fields"),
])
def test_a_vmtable_with_bad_fields_names_the_field_not_what_it_became(tmp_path, capsys, row, field, value, why):
    """A time that is not a number used to be reported as a missing created_at, a short row as an unknown bucket."""
    assert run_pond(["import", "--azure-vmtable", _vmtable_with(tmp_path, row, field, value), "--out",
                 str(tmp_path / "raw")]) == 2
    err = capsys.readouterr().err
    assert why in err and "Fix:" in err and not (tmp_path / "raw").exists(), err


def test_a_vm_the_vmtable_does_not_delete_is_running(tmp_path):
    vms = azure_vms(Path(_vmtable_with(tmp_path, 2, 4, "")))
    assert vms.deleted_at.isna().tolist() == [False, False, True, False]


def test_perf_runs_at_a_url_are_the_local_runs():
    import uuid

    import fsspec

    from pond.telemetry.storage import location, remove_tree

    url = f"memory://pond-perf-{uuid.uuid4().hex}"
    fsspec.filesystem("memory").put(str(FIXTURES / "perf"), url.split("://", 1)[1], recursive=True)
    try:
        pd.testing.assert_frame_equal(perf_workloads(location(url), location(f"{url}/meta.csv")),
                                      perf_workloads(FIXTURES / "perf", FIXTURES / "perf" / "meta.csv"))
    finally:
        remove_tree(location(url))


@pytest.mark.parametrize("name, content, why", [
    ("vmtable.csv.gz", b"\x1f\x8b\x08 truncated", "the compressed file is truncated"),
    ("vmtable.csv", "vmid,x\n\xe9t\xe9\n".encode("latin1"), "the file is not UTF-8 text"),
])
def test_an_unreadable_vmtable_is_named_and_nothing_is_written(tmp_path, capsys, name, content, why):
    (tmp_path / name).write_bytes(content)
    assert run_pond(["import", "--azure-vmtable", str(tmp_path / name), "--out", str(tmp_path / "raw")]) == 2
    err = capsys.readouterr().err
    assert f"table 'vms': cannot read {tmp_path / name}: {why}" in err and "Fix:" in err
    assert not (tmp_path / "raw").exists()


def test_a_truncated_compressed_contract_table_is_named(tmp_path, small_raw, capsys):
    """Every reader shares read_raw's failures: a .csv.gz cut short was an EOFError traceback."""
    import gzip

    folder = tmp_path / "export"
    folder.mkdir()
    for name, df in read_tables(small_raw, validate=False).items():
        df.to_csv(folder / f"{name}.csv", index=False)
    packed = gzip.compress((folder / "vms.csv").read_bytes())
    (folder / "vms.csv").unlink()
    (folder / "vms.csv.gz").write_bytes(packed[: len(packed) // 2])
    assert run_pond(["import", str(folder), "--out", str(tmp_path / "raw")]) == 2
    err = capsys.readouterr().err
    assert f"table 'vms': cannot read {folder / 'vms.csv.gz'}: the compressed file is truncated" in err
    assert not (tmp_path / "raw").exists()


def test_a_missing_perf_meta_file_is_named(tmp_path, capsys):
    assert run_pond(["import", "--perf-dir", str(FIXTURES / "perf"), "--perf-meta", str(tmp_path / "meta.csv"),
                 "--out", str(tmp_path / "raw")]) == 2
    assert f"table 'workloads': cannot read {tmp_path / 'meta.csv'}: the file cannot be read" in capsys.readouterr().err


def test_a_perf_run_that_is_not_text_is_named(tmp_path, capsys):
    """A binary perf.data given where `perf stat -x,` text belongs was a UnicodeDecodeError traceback."""
    import shutil

    perf = tmp_path / "perf"
    shutil.copytree(FIXTURES / "perf", perf)
    (perf / "gapbs_bfs-road.run1.csv").write_bytes(b"PERFILE2\x68\x00\xff\xfe binary")
    assert run_pond(["import", "--perf-dir", str(perf), "--perf-meta", str(perf / "meta.csv"),
                 "--out", str(tmp_path / "raw")]) == 2
    err = capsys.readouterr().err
    assert f"{perf / 'gapbs_bfs-road.run1.csv'}: not UTF-8 text at byte 10" in err and "Fix:" in err
    assert not (tmp_path / "raw").exists()


def test_import_cli_all_sources(tmp_path, small_raw, capsys):
    out = tmp_path / "raw"
    perf = ["--perf-dir", str(FIXTURES / "perf"), "--perf-meta", str(FIXTURES / "perf" / "meta.csv")]
    azure = ["--azure-vmtable", str(FIXTURES / "azure" / "vmtable.csv")]
    # a lab and a trace are not a data set: no slowdowns, no counters
    assert run_pond(["import", *perf, *azure, "--out", str(out)]) == 2
    assert "a full import needs all of" in capsys.readouterr().err and not out.exists()
    assert run_pond(["import", *azure, "--out", str(out)]) == 0      # a trace alone is the simulator's input
    assert len(read_tables(out, ["vms"])["vms"]) == 4
    rc = run_pond(["import", str(small_raw), "--out", str(out)])
    assert rc == 0 and len(read_tables(out)["vms"]) == len(read_tables(small_raw)["vms"])
    spills = read_tables(small_raw, ["spill_counters"])["spill_counters"]      # the optional lab table comes along
    pd.testing.assert_frame_equal(read_tables(out, ["spill_counters"])["spill_counters"], spills)
    csv = tmp_path / "csv"
    csv.mkdir()
    for name in ("workloads", "slowdowns", "vms", "vm_counters", "spill_counters"):
        pd.read_parquet(small_raw / f"{name}.parquet").to_csv(csv / f"{name}.csv", index=False)
    assert run_pond(["import", str(csv), "--out", str(tmp_path / "from_csv")]) == 0
    got = read_tables(tmp_path / "from_csv", ["spill_counters"])["spill_counters"]
    assert len(got) == len(spills) and got.columns.tolist() == spills.columns.tolist()
    # perf runs replace the lab's workloads only with --partial, and the whole set must still hold
    assert run_pond(["import", *perf, "--out", str(out), "--partial"]) == 2
    assert "slowdowns reference unknown workloads" in capsys.readouterr().err


def test_rejected_import_writes_nothing(tmp_path, small_raw, capsys):
    src = tmp_path / "bad"
    src.mkdir()
    for name in ("workloads", "slowdowns", "vm_counters"):
        (src / f"{name}.parquet").write_bytes((small_raw / f"{name}.parquet").read_bytes())
    vms = pd.read_parquet(small_raw / "vms.parquet")
    vms.loc[5, "memory_gb"] = -1
    vms.to_csv(src / "vms.csv", index=False)
    out = tmp_path / "raw"
    out.mkdir()
    (out / "vms.csv").write_text("previous import")
    assert run_pond(["import", str(src), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "table 'vms', column 'memory_gb'" in err and vms.loc[5, "vm_id"] in err
    assert [p.name for p in out.iterdir()] == ["vms.csv"] and (out / "vms.csv").read_text() == "previous import"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".raw")]


def test_azure_trace_simulates_with_static_pools(tmp_path):
    out = tmp_path / "azure"
    assert run_pond(["import", "--azure-vmtable", str(FIXTURES / "azure" / "vmtable.csv"), "--out", str(out)]) == 0
    metrics, plots = tmp_path / "simulate.json", tmp_path / "plots"
    assert run_pond(["simulate", "--static-only", "--raw", str(out), "--pack-by", "region", "--out", str(tmp_path / "sim"),
                 "--metrics", str(metrics), "--plots", str(plots)]) == 0
    m = json.loads(metrics.read_text())
    # four VMs (1-32 vCPUs, 2-96 GB) fit one 96-vCPU, 768-GB server, placed by the default packing, best fit; the
    # trace is shorter than the warm-up
    assert (m["window_vms"], m["servers"], m["assignment"], m["oversized_vms"]) == (4, 1, "best_fit", 0)
    assert set(m["savings_at_headline"]) == {"static_10pct", "static_15pct", "static_30pct", "static_50pct"}
    curves = pd.read_csv(plots / "savings.csv")
    # one server: nothing to share a pool with. Each server and pool at its own peak: exactly nothing saved. Bought,
    # its local DRAM and its pool's capacity are whole GB each (its share of a larger pool's), so an exact share of
    # every VM costs all local's GB or up to one more (106 GB: 10% is 95.4 + 10.6, bought as 96 + 11)
    assert curves.per_server_peaks_pct.abs().max() < 1e-9 and curves.kept_placement_pct.abs().max() < 1e-9
    all_local = pd.read_csv(tmp_path / "sim" / "sizing.csv").all_local_gb.iloc[0]
    assert all_local == 106 and curves.savings_pct.between(-100 / all_local - 1e-3, 0).all(), curves.savings_pct
    assert curves.savings_pct.min() == pytest.approx(-100 / all_local, abs=1e-3)
    assert run_pond(["simulate", "--static-only", "--raw", str(out), "--pack-by", "rack", "--out", str(tmp_path / "sim"),
                 "--metrics", str(metrics), "--plots", str(plots)]) == 2


# One run's counts, as `perf stat -x,` prints them with each layout's flags: two CPUs, two sockets or
# two intervals hold parts of every count, and the plain layout's count is their sum.
PARTS = {"INST_RETIRED.ANY": (600, 400), "CPU_CLK_UNHALTED.THREAD": (250, 750), "cpu/event=0x3c/": (7, 3)}


def _lines(prefixes: list[str]) -> str:
    rows = [f"{p}{parts[i]},,{event},1000,100.00,," for i, p in enumerate(prefixes) for event, parts in PARTS.items()]
    return "# started on Sat Nov 21\n\n" + "\n".join(rows) + "\n"


PLAIN = "\n".join(f"{sum(v)},,{e},1000,100.00,," for e, v in PARTS.items()) + "\n"


@pytest.mark.parametrize("flags, prefixes", [
    ("-A", ["CPU0,", "CPU1,"]),
    ("-I 1000", ["1.000200561,", "2.000411982,"]),
    ("--per-socket", ["S0,24,", "S1,24,"]),
    ("--per-die", ["S0-D0,24,", "S1-D0,24,"]),
    ("--per-core", ["S0-D0-C0,2,", "S0-D0-C1,2,"]),
    ("--per-core (older perf)", ["S0-C0,2,", "S1-C3,2,"]),
    ("--per-node", ["N0,24,", "N1,24,"]),
    ("--per-thread", ["redis-server-4211,", "redis-server-4212,"]),
    ("-I 1000 -A", ["1.000200561,CPU0,", "1.000200561,CPU5,"]),
    ("-I 1000 --per-socket", ["1.000200561,S0,24,", "2.000411982,S0,24,"]),
])
def test_perf_layouts_sum_to_the_plain_counts(flags, prefixes):
    assert parse_perf_stat(_lines(prefixes), flags).to_dict() == parse_perf_stat(PLAIN).to_dict()


def test_a_hybrid_cpus_two_pmus_are_summed_as_one_event():
    text = ("600,,cpu_core/inst_retired.any/,1000,100.00,,\n400,,cpu_atom/inst_retired.any/,1000,100.00,,\n"
            "250,,cpu_core/CPU_CLK_UNHALTED.THREAD/,1000,100.00,,\n750,,cpu_atom/CPU_CLK_UNHALTED.THREAD/,1000,100.00,,\n"
            "7,,cpu/event=0x3c/,1000,100.00,,\n3,,cpu/event=0x3c/,1000,100.00,,\n")
    plain = parse_perf_stat(PLAIN)
    got = parse_perf_stat(text)
    assert got["INST_RETIRED.ANY"] == plain["INST_RETIRED.ANY"] == 1000.0
    assert got["CPU_CLK_UNHALTED.THREAD"] == plain["CPU_CLK_UNHALTED.THREAD"] == 1000.0
    assert got["cpu/event=0x3c/"] == 5.0          # one PMU, listed twice at one place: the mean, as before


def test_a_cpu_that_did_not_count_is_left_out_of_the_sum():
    text = "<not counted>,,INST_RETIRED.ANY,0,0.00,,\n"
    a = parse_perf_stat("CPU0,600,,INST_RETIRED.ANY,1000,100.00,,\nCPU1," + text)
    assert a["INST_RETIRED.ANY"] == 600.0
    assert math.isnan(parse_perf_stat("CPU0," + text + "CPU1," + text)["INST_RETIRED.ANY"])


@pytest.mark.parametrize("text, flag", [
    ('{"interval" : 1.0, "counter-value" : "812751.000000", "event" : "cycles"}\n', "perf stat -j"),
    ("812751;;cycles;1000;100.00;;\n", "perf stat -x,"),
    ("S0,4,812751,cycles\n", "--metric-only"),
])
def test_layouts_that_are_not_counts_are_refused_with_the_flag_to_use(text, flag):
    with pytest.raises(InputFormatError, match="line 1") as err:
        parse_perf_stat(text, "run.csv")
    assert flag in str(err.value)


def test_a_perf_run_on_the_pool_imports_into_spill_counters(tmp_path):
    from pond.telemetry.importers import perf_runs

    meta = (FIXTURES / "perf" / "meta.csv").read_text().splitlines()
    rows = [meta[0] + ",latency_ratio,spilled_pct"] + [f"{line},," for line in meta[1:]]
    rows[2] = rows[2].removesuffix(",,") + ",2.22,50"          # redis run 2: half its footprint on the pool
    (tmp_path / "meta.csv").write_text("\n".join(rows) + "\n")
    workloads, spills = perf_runs(FIXTURES / "perf", tmp_path / "meta.csv")
    run1 = parse_perf_stat((FIXTURES / "perf" / "redis_ycsb-a.run1.csv").read_text())
    run2 = parse_perf_stat((FIXTURES / "perf" / "redis_ycsb-a.run2.csv").read_text())
    w = workloads.set_index("workload_id")
    assert w.loc["redis/ycsb-a", "CPU_CLK_UNHALTED.THREAD"] == run1["CPU_CLK_UNHALTED.THREAD"]   # local runs only
    assert spills[["workload_id", "latency_ratio", "spilled_pct", "repetition"]].values.tolist() == [
        ["redis/ycsb-a", 2.22, 50.0, 0]]
    assert spills["CPU_CLK_UNHALTED.THREAD"].iloc[0] == run2["CPU_CLK_UNHALTED.THREAD"]
    checked = validate_tables({"workloads": workloads, "spill_counters": spills})
    assert len(checked["spill_counters"]) == 1
    (tmp_path / "half.csv").write_text("file,workload_id,workload_class,footprint_gb,spilled_pct\n"
                                       "redis_ycsb-a.run1.csv,redis/ycsb-a,redis,11.245,50\n")
    with pytest.raises(InputFormatError, match="spilled_pct without latency_ratio"):
        perf_runs(FIXTURES / "perf", tmp_path / "half.csv")


def test_a_vm_counted_on_the_pool_imports_into_vm_pool_counters_from_perf_and_from_csv(tmp_path, small_raw):
    """`perf stat -x,` of a VM's vCPUs while part of it sat on a CXL or remote NUMA node: one vm_pool_counters row
    per file, its counts as perf wrote them; a meta file without the allocation is refused by name. The same table
    written as CSV beside the others imports as it was."""
    from pond.telemetry.contract import POOL_FILE
    from pond.telemetry.fleet.pool_counters import recorded_on_pool
    from pond.telemetry.importers import vm_perf_runs
    from pond.telemetry.io import read_raw

    (tmp_path / "vm_meta.csv").write_text("file,vm_id,latency_ratio,pool_gb,measured_at\n"
                                          "redis_ycsb-a.run2.csv,007,2.22,16,2026-01-05T10:00:00Z\n")
    rows = vm_perf_runs(FIXTURES / "perf", tmp_path / "vm_meta.csv")
    run2 = parse_perf_stat((FIXTURES / "perf" / "redis_ycsb-a.run2.csv").read_text())
    assert rows[["vm_id", "latency_ratio", "pool_gb"]].values.tolist() == [["007", 2.22, 16.0]]
    assert rows["CPU_CLK_UNHALTED.THREAD"].iloc[0] == run2["CPU_CLK_UNHALTED.THREAD"]
    workloads = perf_workloads(FIXTURES / "perf", FIXTURES / "perf" / "meta.csv")
    assert len(validate_tables({"workloads": workloads, "vm_pool_counters": rows})["vm_pool_counters"]) == 1
    (tmp_path / "short.csv").write_text("file,vm_id,latency_ratio\nredis_ycsb-a.run2.csv,007,2.22\n")
    with pytest.raises(InputFormatError, match=r"missing columns \['pool_gb', 'measured_at'\]"):
        vm_perf_runs(FIXTURES / "perf", tmp_path / "short.csv")

    csv = tmp_path / "csv"
    csv.mkdir()
    tables = read_tables(small_raw)
    pool = recorded_on_pool(tables, read_raw(small_raw / POOL_FILE), 1.82)
    for name, df in {**tables, "vm_pool_counters": pool}.items():
        df.to_csv(csv / f"{name}.csv", index=False, date_format="%Y-%m-%dT%H:%M:%SZ")
    assert run_pond(["import", str(csv), "--out", str(tmp_path / "raw")]) == 0
    got = read_tables(tmp_path / "raw", ["vm_pool_counters"])["vm_pool_counters"]
    assert got.columns.tolist() == pool.columns.tolist() and len(got) == len(pool)
    assert got["CPU_CLK_UNHALTED.THREAD"].tolist() == pytest.approx(pool["CPU_CLK_UNHALTED.THREAD"].tolist())
