"""Ids and names are text in every reader: ``001`` is not ``1``, ``1e5`` is not 100000,
``2026-01-05`` is not a date and ``NA`` is a customer, through `pond template`, `pond import`, `pond
predict`'s CSV, the Azure vmtable and the perf runs' meta file. The HTTP routes and a request for
``001`` getting ``001``'s answer: tests/data/test_foreign_fleet.py, end to end."""

from __future__ import annotations

import pandas as pd

from pond.serving.offline import request_columns
from pond.telemetry.importers import azure_vms, perf_workloads
from pond.telemetry.io import read_raw, read_tables
from tests.conftest import FIXTURES, run_pond

# what a spreadsheet or a type-guessing reader turns into something else: numbers, floats, dates, missing values
LOOKALIKES = ["000", "001", "01", "1", "1e5", "1E5", "1.0", "-0", "+1", "0x1A", "2026-01-05", "12/31/2025",
              "NA", "None", "null", "NaN", "n/a", "007", "7", "١٢"]


def _ids(values: pd.Series, width: int) -> dict:
    """Each distinct value -> a lookalike first, then zero-padded numbers."""
    distinct = sorted(values.dropna().unique())
    return {v: LOOKALIKES[i] if i < len(LOOKALIKES) else f"{i:0{width}d}" for i, v in enumerate(distinct)}


def test_lookalike_ids_survive_template_and_import(tmp_path, monkeypatch):
    """The template's rows with every id replaced, as the issue's user did, import unchanged."""
    monkeypatch.chdir(tmp_path)
    from tests.conftest import ROOT
    assert run_pond(["--params", str(ROOT / "params.yaml"), "--quiet", "template", "tpl", "--days", "3",
                 "--vms-per-day", "200"]) == 0
    t = {name: pd.read_csv(tmp_path / "tpl" / f"{name}.csv", dtype=str, keep_default_na=False)
         for name in ("workloads", "slowdowns", "vms", "vm_counters", "vm_slowdowns")}
    vm, cust, clus, wl = (_ids(t["vms"].vm_id, 9), _ids(t["vms"].customer_id, 6), _ids(t["vms"].cluster_id, 4),
                          _ids(t["workloads"].workload_id, 5))
    t["vms"] = t["vms"].assign(vm_id=t["vms"].vm_id.map(vm), customer_id=t["vms"].customer_id.map(cust),
                               cluster_id=t["vms"].cluster_id.map(clus), server_id=t["vms"].vm_id.map(vm).str[-3:],
                               region="NA", os="None")
    for name in ("vm_counters", "vm_slowdowns"):
        t[name] = t[name].assign(vm_id=t[name].vm_id.map(vm))
    for name in ("workloads", "slowdowns"):
        t[name] = t[name].assign(workload_id=t[name].workload_id.map(wl))
    src = tmp_path / "export"
    src.mkdir()
    for name, df in t.items():
        df.to_csv(src / f"{name}.csv", index=False)
    assert run_pond(["--quiet", "import", str(src), "--out", str(tmp_path / "raw")]) == 0
    got = read_tables(tmp_path / "raw", ["workloads", "slowdowns", "vms", "vm_counters", "vm_slowdowns"])
    assert got["vms"].vm_id.tolist() == t["vms"].vm_id.tolist()
    for col in ("customer_id", "cluster_id", "server_id", "region", "os"):
        assert got["vms"][col].tolist() == t["vms"][col].tolist(), col
    assert {"001", "01", "1", "1e5", "NA", "2026-01-05"} <= set(got["vms"].customer_id)
    assert got["vm_counters"].vm_id.tolist() == t["vm_counters"].vm_id.tolist()
    assert got["vm_slowdowns"].vm_id.tolist() == t["vm_slowdowns"].vm_id.tolist()
    assert got["workloads"].workload_id.tolist() == t["workloads"].workload_id.tolist()
    assert got["slowdowns"].workload_id.tolist() == t["slowdowns"].workload_id.tolist()


def test_lookalike_ids_survive_a_request_file(tmp_path):
    body = pd.DataFrame({"vm_id": ["007", "7", "1e5"], "customer_id": ["001", "01", "NA"],
                         "vm_type": ["Standard_D2s_v3"] * 3, "vcpus": [2, 2, 2], "memory_gb": [8.0, 8.0, 8.0],
                         "os": ["None", "linux", "null"], "region": ["NA", "eastus", "1"],
                         "cluster_id": ["01", "", "2026-01-05"]})
    body.to_csv(tmp_path / "requests.csv", index=False)
    cols = request_columns(read_raw(tmp_path / "requests.csv", "requests"))
    assert cols["vm_id"] == ["007", "7", "1e5"] and cols["customer_id"] == ["001", "01", "NA"]
    assert cols["os"] == ["None", "linux", "null"] and cols["region"] == ["NA", "eastus", "1"]
    assert cols["cluster_id"] == ["01", None, "2026-01-05"]    # an empty cell is no cluster, as before


def test_lookalike_ids_survive_the_azure_vmtable_and_perf_meta(tmp_path):
    rows = ["001,0001,01,0,300,90,10,50,Interactive,2,4", "1,1,1,0,,90,10,50,Unknown,2,4",
            "1e5,NA,2026-01-05,0,600,90,10,50,Delay-insensitive,4,8"]
    (tmp_path / "vmtable.csv").write_text("\n".join(rows) + "\n")
    vms = azure_vms(tmp_path / "vmtable.csv")
    assert vms.vm_id.tolist() == ["001", "1", "1e5"] and vms.customer_id.tolist() == ["0001", "1", "NA"]
    assert vms.cluster_id.tolist() == ["01", "1", "2026-01-05"]
    meta = pd.read_csv(FIXTURES / "perf" / "meta.csv")
    meta.assign(workload_id=["001", "001", "1"][: len(meta)]).to_csv(tmp_path / "meta.csv", index=False)
    w = perf_workloads(FIXTURES / "perf", tmp_path / "meta.csv")
    assert w.workload_id.tolist() == ["001", "1"]
