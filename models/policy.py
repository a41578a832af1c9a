"""``policy.json`` (written by `optimize`, read by everything that decides) as a checked type.

A policy arrives from a file the service hot-reloads or from a registry bundle: a hand-edited
threshold of -1 or an offset of -5 would be served to every VM. Every value is typed and
range-checked, unknown keys are refused, model files are plain names in their directory, and a
refusal names the file and the field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pond.core.errors import ModelError
from pond.core.params import Day
from pond.telemetry.atomic import write_json

Share = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
Offset = Annotated[float, Field(ge=-1, le=1, allow_inf_nan=False)]   # shifts a fraction in [0, 1]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
FileName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+\.onnx$", max_length=128)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)   # "0.1" is not a number here


class LiPolicy(_Strict):
    enabled: bool
    threshold: Share | None
    model: FileName
    sha256: Sha256
    features: list[Annotated[str, Field(min_length=1)]] = Field(min_length=1)
    classes: list[int] = Field(min_length=1, max_length=2)
    expected_li: Share
    expected_fp: Share
    fp_bound: Share
    method: Annotated[str, Field(pattern=r"^[a-z0-9_]{1,40}$")] = "random_forest"
    error_rate: Share = 0.0          # error rate among what was called insensitive at the threshold: lab + fleet
    lab_called: int = Field(0, ge=0)
    lab_errors: int = Field(0, ge=0)
    fleet_called: int = Field(0, ge=0)   # history keys with measured slowdowns (vm_slowdowns) called insensitive
    fleet_errors: float = Field(0.0, ge=0, allow_inf_nan=False)   # their shares of sensitive VMs, summed

    @model_validator(mode="after")
    def _threshold_iff_enabled(self) -> LiPolicy:
        if self.enabled != (self.threshold is not None):
            raise ValueError("threshold must be a number exactly when enabled is true")
        return self


class UmPolicy(_Strict):
    enabled: bool
    target_op: Share
    offset: Offset
    model: FileName
    sha256: Sha256
    expected_um: Share
    expected_op: Share
    op_bound: Share


class Alternative(_Strict):
    li_threshold: Share | None
    um_offset: Offset | None
    um_target_op: Share
    expected_pool_share: Share


class Expected(_Strict):
    pool_share: Share
    mispredictions: Share
    mispredictions_bound: Share


class Serve(_Strict):
    """Which of the solved policies the service applies, and its pool cap (params ``optimize.serve``)."""

    policy: Annotated[str, Field(pattern="^(combined|li_only|um_only|all_local)$")]   # all_local: no pool bought
    pool_cap: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] | None


class FleetMonitor(_Strict):
    """What the QoS monitor flagged among the recent VMs (``optimize.tonight.monitor_evidence``)."""

    vms_watched: Annotated[int, Field(ge=0)]
    monitor: Literal["pool_counters", "vm_pool_counters", "first_hour"] = "first_hour"   # what it sees (optimize.monitor)
    vms_flagged: Annotated[int, Field(ge=0)] = 0
    vms_window_not_ended: Annotated[int, Field(ge=0)] = 0
    vms_without_counters: Annotated[int, Field(ge=0)] = 0
    days: Annotated[int, Field(ge=0)] = 0
    lab_recall: Share | None = None
    lab_false_alarm_rate: Share | None = None
    flag_rate: Share | None = None     # tonight's error rate the flags predict at the chosen LI threshold
    mitigation_spare: Share | None = None   # the monitor's capacity left for zNUMA overpredictions (solver)
    li_errors_caught: Share | None = None   # the share of the chosen LI calls' errors the solver takes as mitigated
    li_error_recall: Share | None = None    # the monitor's recall credited among them (its lab lower bound)
    li_error_workloads: Annotated[float, Field(ge=0)] | None = None   # the lab's LI errors that recall rests on
    recall_by_threshold: bool = False       # the flags divided by the recall near the threshold (optimize.recall_errors)
    recall_divisor: Share | None = None     # the recall the flags were divided by at the chosen LI threshold
    false_alarm_discount: Share | None = None   # the false-alarm rate taken off the flag rate there (optimize)


class Policy(_Strict):
    as_of: Day
    pdm: float = Field(gt=0, le=1000, allow_inf_nan=False)
    tp: float = Field(gt=0, le=100)
    latency_ratio: float = Field(ge=1, le=10)
    confidence: float | None = Field(gt=0, lt=1)
    history_share: Share
    misprediction_budget: Share
    li: LiPolicy
    um: UmPolicy
    expected: Expected
    alternatives: dict[Annotated[str, Field(pattern="^(li_only|um_only)$")], Alternative] = Field(min_length=2,
                                                                                                   max_length=2)
    serve: Serve = Serve(policy="combined", pool_cap=None)   # files written before the setting: Pond's rule
    fleet_reports: dict[Annotated[str, Field(pattern=r"^[a-z_]{1,40}$")], Annotated[int, Field(ge=0)]] = {}
    fleet_monitor: FleetMonitor = FleetMonitor(vms_watched=0)   # files written before the monitor's evidence


def read_policy(path: Path) -> Policy:
    """The checked policy; ModelError naming file and field."""
    return load_policy(path)[0]


def write_policy(path: Path, policy: Policy) -> None:
    """``policy.json``, written whole; the one place its text is formatted. Only the fields that were set:
    a default the writer did not give (the monitor's counts when it is off) is not claimed as measured."""
    write_json(path, policy.model_dump(mode="json", exclude_unset=True))


def load_policy(path: Path) -> tuple[Policy, bytes]:
    """``read_policy`` and the bytes it was parsed from, read once: whoever labels what it serves with a
    hash of the file must hash these bytes, not read the file again (it may be replaced in between)."""
    try:
        data = Path(path).read_bytes()
        raw = json.loads(data)
    except FileNotFoundError:
        raise ModelError(f"{path} not found: run `dvc repro` (or point the service at a bundle)") from None
    except (OSError, ValueError) as exc:
        raise ModelError(f"{path} is not readable JSON ({type(exc).__name__}: {str(exc)[:120]}); "
                         "regenerate it with `dvc repro`") from None
    try:
        return Policy.model_validate(raw), data
    except ValidationError as exc:
        e = exc.errors()[0]
        field = ".".join(str(x) for x in e["loc"]) or "(the whole file)"
        more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
        raise ModelError(f"{path}: field {field}: {e['msg']}{more}; do not edit policy.json by hand, "
                         "regenerate it with `dvc repro`") from None
