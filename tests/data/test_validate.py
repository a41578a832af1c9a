"""`pond validate` / `pond import`: what a directory of telemetry can feed, said before any stage runs."""

from __future__ import annotations

import pandas as pd

from pipelines.cli import main
from pipelines.validate import check


def _vms_only(small_tables, d):
    d.mkdir()
    small_tables["vms"].head(300).to_csv(d / "vms.csv", index=False)
    return d


def test_built_in_fleet_feeds_every_command(small_raw, capsys):
    state, problems = check(small_raw)
    assert all(s.startswith("ok (") for s in state.values()) and not any(problems.values())
    assert main(["validate", str(small_raw)]) == 0
    assert "BLOCKED" not in capsys.readouterr().out


def test_vms_alone_names_what_each_command_lacks(small_tables, tmp_path, capsys):
    d = _vms_only(small_tables, tmp_path / "export")
    state, problems = check(d)
    assert state["vms"].startswith("ok (300 rows") and state["workloads"] == "missing"
    repro = next(v for k, v in problems.items() if k.startswith("dvc repro"))
    assert [m.split(" ")[0] for m in repro] == ["workloads", "slowdowns", "vm_counters"]
    assert problems["pond simulate --static-only (DRAM with static pools, no models)"] == []
    assert main(["validate", str(d)]) == 1
    out = capsys.readouterr().out
    assert "BLOCKED dvc repro" in out and "ready   pond simulate --static-only" in out


def test_one_bad_table_does_not_hide_the_others(small_raw, tmp_path):
    d = tmp_path / "bad"
    d.mkdir()
    for t in ("workloads", "slowdowns", "vm_counters"):
        pd.read_parquet(small_raw / f"{t}.parquet").to_parquet(d / f"{t}.parquet")
    vms = pd.read_parquet(small_raw / "vms.parquet")
    vms.loc[3, "memory_gb"] = -1.0
    vms.to_parquet(d / "vms.parquet")
    state, problems = check(d)
    assert state["vms"].startswith("invalid: table 'vms', column 'memory_gb'")
    assert state["workloads"].startswith("ok (") and state["slowdowns"].startswith("ok (")
    assert state["vm_counters"].startswith("ok (")
    assert problems["pond calibrate"] == [m for m in problems["pond calibrate"] if m.startswith("vms is not usable")]


def test_import_ends_with_what_the_tables_feed(small_raw, tmp_path, capsys):
    assert main(["import", str(small_raw), "--out", str(tmp_path / "raw")]) == 0
    out = capsys.readouterr().out
    assert "import: wrote" in out and "ready   dvc repro" in out
