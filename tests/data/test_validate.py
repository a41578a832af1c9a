"""`pond validate` / `pond import`: what a directory of telemetry can feed, said before any stage runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import yaml

from pond.core.params import Params
from pond.evaluation.readiness import REPRO, STATIC, check
from pond.telemetry.contract import TABLES
from tests.conftest import run_pond, small_params


def _vms_only(small_tables, d):
    d.mkdir()
    small_tables["vms"].head(300).to_csv(d / "vms.csv", index=False)
    return d


def test_built_in_fleet_feeds_every_command(small_raw, tmp_path, capsys):
    state, problems = check(small_raw, Params(**small_params()))
    assert all(state[t].startswith("ok (") for t in TABLES) and not any(problems.values())
    assert state["vm_slowdowns"].startswith("absent (optional: slowdowns measured on fleet VMs")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(small_params()))
    assert run_pond(["--params", str(tmp_path / "params.yaml"), "validate", str(small_raw)]) == 0
    assert "BLOCKED" not in capsys.readouterr().out


def test_a_night_outside_the_trace_names_the_days_that_fit(small_raw, tmp_path, capsys):
    """The small fleet's VMs were created 2026-01-01 to 01-12; with the small params a night needs a usable UM
    night before it (train, calibration and next-day VMs), and VMs created the day after it: the first such night
    is 01-03 (its UM backtest's last night scores the as-of day itself), the last 01-11. Backtest nights before
    01-03 are not replayed, and validate says how many are."""
    late = small_params()
    late["base"]["as_of"] = "2026-03-01"
    _, problems = check(small_raw, Params(**late))
    assert problems[REPRO] == [("base.as_of 2026-03-01 cannot be a night on this trace (the trace's VMs were created "
                               "from 2026-01-01 to 2026-01-12). Fix: set base.as_of in params.yaml to a day from "
                               "2026-01-03 to 2026-01-11")]
    for day, ok in (("2026-01-02", False), ("2026-01-03", True), ("2026-01-11", True), ("2026-01-12", False)):
        late["base"]["as_of"] = day
        assert (check(small_raw, Params(**late))[1][REPRO] == []) is ok, day
    late["base"]["as_of"], late["backtest"]["nights"] = "2026-01-11", 40      # a month asked of 12 days
    state, problems = check(small_raw, Params(**late))
    assert problems[REPRO] == []
    assert state["vms"].endswith("; 9 of the 40 backtest nights ending base.as_of have telemetry enough before them "
                                 "to train on: `backtest` replays those 9")
    late["train_um"].update(train_days=40, calib_lag_days=20, calib_days=5)
    _, problems = check(small_raw, Params(**late))
    assert "nor can any other day with these params" in problems[REPRO][0]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({**small_params(), "base": {"seed": 5, "as_of": "2026-03-01"}}))
    assert run_pond(["--params", str(tmp_path / "params.yaml"), "validate", str(small_raw)]) == 1
    assert "a day from 2026-01-03 to 2026-01-11" in capsys.readouterr().out


def test_vms_alone_names_what_each_command_lacks(small_tables, tmp_path, capsys):
    d = _vms_only(small_tables, tmp_path / "export")
    state, problems = check(d)
    assert state["vms"].startswith("ok (300 rows") and state["workloads"] == "missing"
    repro = next(v for k, v in problems.items() if k.startswith("dvc repro"))
    assert [m.split(" ")[0] for m in repro] == ["workloads", "slowdowns", "vm_counters"]
    assert problems["pond simulate --static-only (DRAM with static pools, no models)"] == []
    assert run_pond(["validate", str(d)]) == 1
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
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(small_params()))
    assert run_pond(["--params", str(tmp_path / "params.yaml"), "import", str(small_raw), "--out", str(tmp_path / "raw")]) == 0
    out = capsys.readouterr().out
    assert "import: wrote" in out and "ready   dvc repro" in out


def test_committed_templates_are_the_template_format(tmp_path):
    """docs/byo/templates: a few rows of each table, with exactly the columns `pond template` writes; every table
    check passes, and validate says why four VMs of one day cannot make a night."""
    from tests.conftest import ROOT

    state, problems = check(ROOT / "docs/byo/templates", Params())
    assert all(s.startswith("ok (") for s in state.values()), state
    assert "nor can any other day with these params" in problems[REPRO][0]
    assert run_pond(["template", str(tmp_path / "t"), "--days", "2", "--vms-per-day", "50"]) == 0
    for table in ("workloads", "slowdowns", "vms", "vm_counters", "vm_slowdowns", "spill_counters", "vm_pool_counters"):
        committed = pd.read_csv(ROOT / "docs/byo/templates" / f"{table}.csv", nrows=0).columns.tolist()
        assert committed == pd.read_csv(tmp_path / "t" / f"{table}.csv", nrows=0).columns.tolist(), table
    assert "workload_id" not in pd.read_csv(tmp_path / "t" / "vms.csv", nrows=0).columns


def test_a_broken_optional_table_blocks_the_nightly_job_by_name(small_reports_raw, tmp_path):
    d = tmp_path / "reports"
    d.mkdir()
    for t in ("workloads", "slowdowns", "vms", "vm_counters", "vm_slowdowns"):
        pd.read_parquet(small_reports_raw / f"{t}.parquet").to_parquet(d / f"{t}.parquet")
    state, problems = check(d, Params(**small_params()))
    assert state["vm_slowdowns"].startswith("ok (") and not any(problems.values())
    assert "left out" not in state["vm_slowdowns"]
    reports = pd.read_parquet(d / "vm_slowdowns.parquet")
    vms = pd.read_parquet(d / "vms.parquet").set_index("vm_id")
    odd = reports.copy()
    odd.loc[0, "vm_id"] = "vm-elsewhere"                                        # a VM this export does not hold
    odd.loc[[1, 2], "measured_at"] = vms.created_at[odd.vm_id[[1, 2]]].to_numpy() - pd.Timedelta(hours=1)
    odd.to_parquet(d / "vm_slowdowns.parquet")
    state, problems = check(d, Params(**small_params()))
    assert state["vm_slowdowns"].endswith("; left out: 1 of VMs the vms table does not hold, 2 measured before "
                                          "their VM was created (a reused id or a wrong clock)")
    assert not any(problems.values())
    reports.loc[2, "latency_ratio"] = 0.5
    reports.to_parquet(d / "vm_slowdowns.parquet")
    state, problems = check(d, Params(**small_params()))
    assert state["vm_slowdowns"].startswith("invalid: table 'vm_slowdowns', column 'latency_ratio'")
    assert problems[REPRO] == ["vm_slowdowns is not usable (the nightly job reads it where it exists; fix it or "
                               "remove it): " + state["vm_slowdowns"].removeprefix("invalid: ")]


def test_a_lab_without_full_pool_runs_blocks_the_nightly_job_before_it_runs(small_tables, tmp_path):
    """train_li labels a workload by its slowdown entirely on pool at each ratio it trains: found by validate, not
    by train_li after the features stage."""
    d = tmp_path / "export"
    d.mkdir()
    tables = {**small_tables, "slowdowns": small_tables["slowdowns"].query("spilled_pct < 100")}
    for t in TABLES:
        tables[t].to_parquet(d / f"{t}.parquet")
    _, problems = check(d, Params(**small_params()))
    assert [p.split(":")[0] for p in problems[REPRO]] == [f"train_li.latency_ratios {r}" for r in ("1.82", "2.22")]
    assert "column 'spilled_pct': no run has its memory entirely on pool" in problems[REPRO][0]
    full = small_tables["slowdowns"].query("spilled_pct == 100 and latency_ratio == 2.22")
    pd.concat([tables["slowdowns"], full]).to_parquet(d / "slowdowns.parquet")
    _, problems = check(d, Params(**small_params()))
    assert problems[REPRO] == [("train_li.latency_ratios 1.82: table 'slowdowns', column 'latency_ratio': no runs "
                               "entirely on pool (spilled_pct=100) at latency_ratio 1.82. Fix: measure it, or train "
                               "on the ratios with full-pool runs: [2.22]")]


def test_an_azure_v1_vmtable_feeds_the_static_simulation_and_says_why_nothing_else(tmp_path, capsys):
    """The public V1 rows: exact core counts and 0.75 / 1.75 GB sizes, the category misspelled as the public file
    has it, no header. Import succeeds, validate calls `simulate --static-only` ready, the command then runs, and
    every BLOCKED line says why (vms was "not usable" with no reason, and the static simulation too)."""
    rng = np.random.default_rng(3)
    n = 1500
    cores = rng.choice([1, 2, 4, 8, 24], n)
    memory = {1: 0.75, 2: 1.75, 4: 3.5, 8: 7, 24: 14}
    created = np.sort(rng.integers(0, 25 * 86400, n))
    ended = created + rng.integers(300, 3 * 86400, n)
    rows = [f"v{i:06d}xK+/,sub{i % 40:03d}Q==,dep{i % 150:03d}/A,{c},{e if e < 30 * 86400 else ''},99.1,3.4,10.2,"
            f"{('Interactive', 'Delay-insensitive', 'Unkown')[i % 3]},{k},{memory[k]}"
            for i, (c, e, k) in enumerate(zip(created, ended, cores))]
    (tmp_path / "vmtable.csv").write_text("\n".join(rows) + "\n")
    raw = tmp_path / "raw"
    assert run_pond(["--quiet", "import", "--azure-vmtable", str(tmp_path / "vmtable.csv"), "--out", str(raw)]) == 0
    assert sorted(pd.read_parquet(raw / "vms.parquet").memory_gb.unique().tolist()) == [0.75, 1.75, 3.5, 7.0, 14.0]
    capsys.readouterr()
    _state, problems = check(raw, Params(**small_params()))
    assert problems[STATIC] == []
    assert "vms has no untouched_fraction on any VM" in " ".join(problems[REPRO])
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(small_params()))
    assert run_pond(["--params", str(tmp_path / "params.yaml"), "validate", str(raw)]) == 1
    out = capsys.readouterr().out
    assert f"ready   {STATIC}" in out
    blocked = [line for line in out.splitlines() if line.strip().startswith("- ")]
    assert blocked and all(": " in line and line.split(": ", 1)[1].strip() for line in blocked), out
    assert run_pond(["--quiet", "--params", str(tmp_path / "params.yaml"), "simulate", "--static-only", "--raw", str(raw),
                 "--out", str(tmp_path / "sim"), "--metrics", str(tmp_path / "sim.json"),
                 "--plots", str(tmp_path / "plots")]) == 0


def test_every_blocked_line_names_its_reason(small_tables, tmp_path):
    d = tmp_path / "export"
    d.mkdir()
    small_tables["vms"].head(300).to_csv(d / "vms.csv", index=False)
    bad = small_tables["workloads"].copy()
    bad.loc[0, "footprint_gb"] = -1.0
    bad.to_csv(d / "workloads.csv", index=False)
    _state, problems = check(d, Params(**small_params()))
    for lines in problems.values():
        for line in lines:
            _table, reason = line.split(": ", 1)
            assert reason.strip() and reason != "", line
    assert any("footprint_gb must lie in" in line for line in problems[REPRO])
    assert any(line.startswith("vm_counters is missing: ") for line in problems[REPRO])


def test_a_params_file_named_that_does_not_exist_is_refused_not_skipped(small_raw, tmp_path, capsys):
    """Named with --params, a missing file is an error (it used to validate silently without params); left out,
    ./params.yaml is used when there is one."""
    from tests.conftest import run_pond

    for stage in (["validate", str(small_raw)],
                  ["calibrate", "--raw", str(small_raw), "--metrics", str(tmp_path / "m.json")]):
        assert run_pond(["--params", str(tmp_path / "typo.yaml"), *stage]) == 2
        assert f"--params {tmp_path / 'typo.yaml'}: no such file" in capsys.readouterr().err
    assert not (tmp_path / "m.json").exists()
