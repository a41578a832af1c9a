"""The contract rejects bad input with the table, column and rows named; good input passes."""

from __future__ import annotations

import pandas as pd
import pytest

from pond.core.errors import ContractError
from pond.telemetry.contract import TABLES, validate_table, validate_tables


def test_generated_fleet_follows_the_contract(small_tables):
    assert set(small_tables) == set(TABLES)
    vms = small_tables["vms"]
    assert vms.vm_id.is_unique and (vms.memory_gb > 0).all()
    assert str(vms.created_at.dt.tz) == "UTC"


def _reject(tables, table, column, *fragments):
    with pytest.raises(ContractError) as err:
        validate_tables(tables)
    msg = str(err.value)
    assert err.value.table == table and err.value.column == column, msg
    assert f"table '{table}'" in msg and f"column '{column}'" in msg
    for f in fragments:
        assert f in msg, msg
    return err.value


def test_missing_column(tables):
    tables["vms"] = tables["vms"].drop(columns="memory_gb")
    _reject(tables, "vms", "memory_gb", "missing columns ['memory_gb']")


def test_a_missing_required_value_names_the_row_and_the_fix(tables):
    vms = tables["vms"]
    vms.loc[4, "customer_id"] = None
    err = _reject(tables, "vms", "customer_id", "values are missing", "Fix: fill customer_id in these rows, or drop")
    assert err.rows == [vms.loc[4, "vm_id"]]


def test_non_numeric_memory_names_the_row(tables):
    vms = tables["vms"]
    vms["memory_gb"] = vms["memory_gb"].astype(object)
    vms.loc[3, "memory_gb"] = "sixteen"
    err = _reject(tables, "vms", "memory_gb", "not numeric")
    assert err.rows == [vms.loc[3, "vm_id"]]


def test_duplicate_ids(tables):
    vms = tables["vms"]
    vms.loc[1, "vm_id"] = vms.loc[0, "vm_id"]
    err = _reject(tables, "vms", "vm_id", "duplicate ids")
    assert err.rows == [vms.loc[0, "vm_id"]]


@pytest.mark.parametrize("first, second", [("vm-b", "vm-b"), (" vm-b", "vm-b\t"), ("vm-z", "vm-z")],
                         ids=["same", "same once stripped", "last in order"])
def test_duplicate_ids_are_found_in_arrow_strings(tables, first, second):
    """The sort-based check sees a repeat wherever it sorts, blanks stripped first."""
    vms = tables["vms"].copy()
    vms["vm_id"] = vms["vm_id"].astype("string[pyarrow]")
    vms.loc[2, "vm_id"], vms.loc[len(vms) - 1, "vm_id"] = first, second
    tables["vms"] = vms
    err = _reject(tables, "vms", "vm_id", "duplicate ids")
    assert err.rows == [first.strip()]


def test_typed_ids_share_the_read_columns_memory(tables):
    """Ids with nothing to strip are not copied: at fleet scale the typed table must not double them."""
    raw = tables["vms"].assign(vm_id=tables["vms"]["vm_id"].astype("string[pyarrow]"))
    typed = validate_table(raw, "vms")

    def data_buffer(s):
        return s.array.__arrow_array__().chunk(0).buffers()[2].address

    assert data_buffer(typed["vm_id"]) == data_buffer(raw["vm_id"])
    raw.loc[0, "vm_id"] = f" {raw.loc[0, 'vm_id']}"
    assert validate_table(raw, "vms")["vm_id"].iloc[0] == raw.loc[0, "vm_id"].strip()


@pytest.mark.parametrize("value", [0.0, -4.0])
def test_memory_must_be_positive(tables, value):
    tables["vms"].loc[7, "memory_gb"] = value
    err = _reject(tables, "vms", "memory_gb", "memory_gb must be a finite number in (0, 65536]")
    assert err.rows == [tables["vms"].loc[7, "vm_id"]]


@pytest.mark.parametrize("value", [-0.01, 1.5])
def test_untouched_fraction_in_unit_interval(tables, value):
    ended = tables["vms"].untouched_fraction.notna().idxmax()
    tables["vms"].loc[ended, "untouched_fraction"] = value
    _reject(tables, "vms", "untouched_fraction", "[0, 1]")


def test_deleted_before_created(tables):
    vms = tables["vms"]
    i = vms.deleted_at.notna().idxmax()
    vms.loc[i, "deleted_at"] = vms.loc[i, "created_at"] - pd.Timedelta(seconds=1)
    err = _reject(tables, "vms", "deleted_at", "before created_at")
    assert err.rows == [vms.loc[i, "vm_id"]]


def test_negative_counter(tables):
    c = tables["vm_counters"]
    c.loc[2, "CYCLE_ACTIVITY.STALLS_L3_MISS"] = -1.0
    err = _reject(tables, "vm_counters", "CYCLE_ACTIVITY.STALLS_L3_MISS", "negative")
    assert err.rows == [c.loc[2, "vm_id"]]


def test_non_numeric_counter(tables):
    w = tables["workloads"]
    w["INST_RETIRED.ANY"] = w["INST_RETIRED.ANY"].astype(object)
    w.loc[0, "INST_RETIRED.ANY"] = "12e"
    _reject(tables, "workloads", "INST_RETIRED.ANY", "not numeric")


def test_slowdowns_reference_known_workloads(tables):
    tables["slowdowns"].loc[0, "workload_id"] = "nope/unknown"
    _reject(tables, "slowdowns", "workload_id", "unknown workloads")


def test_counters_of_unknown_vms(tables):
    tables["vm_counters"].loc[0, "vm_id"] = "vm-does-not-exist"
    _reject(tables, "vm_counters", "vm_id", "unknown VMs", "vm-does-not-exist")


def test_running_vm_cannot_carry_a_label(tables):
    vms = tables["vms"]
    i = vms.deleted_at.notna().idxmax()
    vms.loc[i, "deleted_at"] = pd.NaT
    _reject(tables, "vms", "untouched_fraction", "running VM")


def test_csv_strings_are_typed():
    raw = pd.DataFrame({"workload_id": ["a"], "latency_ratio": ["1.82"], "spilled_pct": ["100"],
                        "slowdown_pct": ["-0.4"], "repetition": ["0"]})
    out = validate_table(raw, "slowdowns")
    assert out.slowdown_pct.iloc[0] == -0.4 and out.repetition.dtype == "Int64"


def test_fractional_repetition_rejected():
    raw = pd.DataFrame({"workload_id": ["a"], "latency_ratio": [1.82], "spilled_pct": [100.0],
                        "slowdown_pct": [3.0], "repetition": [0.5]})
    with pytest.raises(ContractError, match="whole numbers"):
        validate_table(raw, "slowdowns")


@pytest.mark.parametrize("dtype", ["datetime64[us]", "datetime64[ms]", "datetime64[us, UTC]",
                                   "datetime64[us, Asia/Tokyo]"])
def test_typed_timestamps_are_taken_as_parsing_would_take_them(tables, dtype):
    """Parquet's typed timestamps skip the text parse (a tenth of `simulate`'s time at 10M VMs): naive
    ones are UTC, zoned ones converted; the result is the parse's, and the range check still holds."""
    vms = tables["vms"].head(50).copy()
    typed = vms.created_at.dt.tz_convert("UTC")
    vms["created_at"] = (typed.dt.tz_localize(None) if "UTC" not in dtype and "/" not in dtype
                         else typed.dt.tz_convert(dtype.split(", ")[1][:-1])).astype(dtype)
    parsed = pd.to_datetime(vms.created_at.astype(str), utc=True, format="mixed")
    out = validate_table(vms, "vms")
    assert str(out.created_at.dt.tz) == "UTC" and out.created_at.dt.unit == dtype[11:13]
    assert (out.created_at == parsed).all() and (out.created_at == typed).all()
    vms.loc[vms.index[3], "created_at"] = pd.Timestamp("1999-01-01", tz=vms.created_at.dt.tz)
    with pytest.raises(ContractError, match="created_at must lie in") as err:
        validate_table(vms, "vms")
    assert err.value.rows == [vms.vm_id.iloc[3]]


def test_fleet_slowdown_reports_are_optional_and_checked(small_reports_raw):
    from pond.telemetry.io import read_optional, read_tables

    tables = read_tables(small_reports_raw, [*TABLES, "vm_slowdowns"])
    assert len(tables["vm_slowdowns"]) > 0
    bad = tables["vm_slowdowns"].astype({"slowdown_pct": object})
    bad.loc[4, "slowdown_pct"] = "slow"
    err = _reject({**tables, "vm_slowdowns": bad}, "vm_slowdowns", "slowdown_pct", "not numeric")
    assert err.rows == ["row 4"]
    late = tables["vm_slowdowns"].assign(measured_at="2026-13-01")
    _reject({"vm_slowdowns": late}, "vm_slowdowns", "measured_at", "not timestamps")
    # a report of a VM this export does not hold is not an error: optimize counts it and leaves it out
    foreign = tables["vm_slowdowns"].assign(vm_id="vm-elsewhere")
    assert validate_tables({**tables, "vm_slowdowns": foreign})["vm_slowdowns"].vm_id.eq("vm-elsewhere").all()
    assert read_optional(small_reports_raw / "nowhere", "vm_slowdowns") is None


def test_spill_counters_name_known_workloads_and_count_the_lab_s_events(small_raw, tables):
    from pond.telemetry.io import read_tables as read

    spills = read(small_raw, ["workloads", "spill_counters"])["spill_counters"]
    assert len(spills) == len(tables["slowdowns"])
    _reject({"workloads": tables["workloads"], "spill_counters": spills.assign(workload_id="w-unknown")},
            "spill_counters", "workload_id", "unknown workloads")
    renamed = spills.rename(columns={"CYCLE_ACTIVITY.STALLS_L3_MISS": "cycle_activity.stalls_l3_miss"})
    _reject({"workloads": tables["workloads"], "spill_counters": renamed.drop(columns="cycle_activity.stalls_l3_miss")},
            "spill_counters", "CYCLE_ACTIVITY.STALLS_L3_MISS", "event columns differ from workloads'")
    _reject({"spill_counters": spills.assign(spilled_pct=130.0)}, "spill_counters", "spilled_pct", "[0, 100]")


def test_vm_pool_counters_count_the_lab_s_events_and_may_name_vms_the_export_does_not_hold(small_raw, tables):
    """The hypervisor's counts of VMs on a pool: some of the lab's events, a pool latency and GB in range; a row of a VM
    this export does not hold is kept (the replay matches rows to VMs itself)."""
    from pond.telemetry.contract import POOL_FILE
    from pond.telemetry.fleet.pool_counters import recorded_on_pool
    from pond.telemetry.io import read_raw
    from pond.telemetry.io import read_tables as read

    raw = read(small_raw, ["vms", "vm_counters"])
    rows = recorded_on_pool({**raw, "vms": tables["vms"]}, read_raw(small_raw / POOL_FILE), 1.82)
    assert len(rows) > 10 and rows.columns[:4].tolist() == ["vm_id", "latency_ratio", "pool_gb", "measured_at"]
    elsewhere = rows.assign(vm_id=["vm-elsewhere"] + rows.vm_id.tolist()[1:])
    checked = validate_tables({"workloads": tables["workloads"], "vms": tables["vms"],
                               "vm_pool_counters": elsewhere})
    assert len(checked["vm_pool_counters"]) == len(rows)
    # a hypervisor counts what the QoS monitor reads: any of the lab's events, none it does not count
    fewer = rows.drop(columns="CYCLE_ACTIVITY.STALLS_L3_MISS")
    assert len(validate_tables({"workloads": tables["workloads"], "vm_pool_counters": fewer})["vm_pool_counters"]) \
        == len(rows)
    _reject({"workloads": tables["workloads"],
             "vm_pool_counters": fewer.assign(**{"cycle_activity.stalls_l3_miss": 1.0})},
            "vm_pool_counters", "cycle_activity.stalls_l3_miss", "only in upper and lower case")
    _reject({"vm_pool_counters": rows.assign(pool_gb=-1.0)}, "vm_pool_counters", "pool_gb")
    _reject({"vm_pool_counters": rows.assign(latency_ratio=0.5)}, "vm_pool_counters", "latency_ratio")
