"""Request and response bodies of the HTTP API (DESIGN.md); field names are the contract."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from serving.engine import parse_vm_type

Id = Field(min_length=1, max_length=256)


class AllocationRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    vm_id: str = Id
    customer_id: str = Id
    vm_type: str = Field(min_length=1, max_length=128, description="Azure size name, e.g. Standard_D4s_v3")
    vcpus: int = Field(gt=0, le=1024)
    memory_gb: float = Field(gt=0, le=65536, allow_inf_nan=False)
    os: str = Field(min_length=1, max_length=64)
    region: str = Field(min_length=1, max_length=64)
    cluster_id: str | None = Field(default=None, max_length=256)
    counters: dict[str, float] | None = Field(default=None, description="accepted for the QoS path; not used to size")

    @field_validator("vm_type")
    @classmethod
    def _known_format(cls, v: str) -> str:
        if parse_vm_type(v) is None:
            raise ValueError("vm_type must look like Standard_<FAMILY><SIZE>[suffix]_v<GEN>, e.g. Standard_D4s_v3")
        return v


class Allocation(BaseModel):
    vm_id: str
    decision: Literal["pool_only", "znuma", "local_only"]
    memory_gb: float
    local_gb: float
    pool_gb: float
    znuma_gb: float
    p_insensitive: float | None = Field(description="null without workload history (no LI prediction)")
    untouched_fraction: float = Field(description="conservative untouched fraction after the policy's offset")
    has_history: bool = Field(description="workload history for (customer_id, vm_type, region) in the snapshot")
    customer_history: bool = Field(description="false: unknown customer, the UM model's no-history defaults")
    model_version: str
    policy: dict


class BatchRequest(BaseModel):
    requests: list[AllocationRequest]


class BatchResponse(BaseModel):
    allocations: list[Allocation]


class QosRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    vm_id: str = Id
    counters: dict[str, float] = Field(min_length=1, description="raw PMU counts of the VM's recent runtime")
    pool_gb: float | None = Field(default=None, ge=0, allow_inf_nan=False,
                                  description="pool memory the VM has now; 0 -> nothing to reconfigure")

    @field_validator("counters")
    @classmethod
    def _finite(cls, v: dict[str, float]) -> dict[str, float]:
        bad = [k for k, x in v.items() if not math.isfinite(x) or x < 0]
        if bad:
            raise ValueError(f"counts must be finite and >= 0: {bad[:5]}")
        return v


class QosResponse(BaseModel):
    vm_id: str
    p_exceeds_pdm: float
    exceeds_pdm: bool
    action: Literal["none", "reconfigure_local"]
    pdm: float
    model_version: str


class ModelInfo(BaseModel):
    version: str
    as_of: str | None
    li_sha256: str
    um_sha256: str
    history_keys: int
    customers: int
    prefilled_shapes: int = 0
    snapshot_time: str | None
    loaded_at: str
    source: str
    policy: dict
