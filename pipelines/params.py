"""Reading params.yaml into the typed parameter objects of each stage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from features.build import FeatureParams
from telemetry.errors import ConfigError
from telemetry.fleet import FleetParams, LabParams


def load(path: Path | str = "params.yaml") -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path} not found: run from the repository root or pass --params")
    data = yaml.safe_load(path.read_text()) or {}
    if "base" not in data or "seed" not in data["base"]:
        raise ConfigError(f"{path}: section 'base' with a 'seed' is required")
    return data


def typed(cls: type, section: dict[str, Any], where: str, **extra: Any) -> Any:
    fields = set(cls.__dataclass_fields__)
    unknown = sorted(set(section) - fields)
    if unknown:
        raise ConfigError(f"params.yaml {where}: unknown keys {unknown}; allowed: {sorted(fields)}")
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in section.items()}
    return cls(**values, **extra)


def lab_params(p: dict[str, Any]) -> LabParams:
    return typed(LabParams, p.get("generate", {}).get("lab", {}), "generate.lab", seed=p["base"]["seed"])


def fleet_params(p: dict[str, Any]) -> FleetParams:
    return typed(FleetParams, p.get("generate", {}).get("fleet", {}), "generate.fleet", seed=p["base"]["seed"])


def feature_params(p: dict[str, Any]) -> FeatureParams:
    return typed(FeatureParams, p.get("features", {}), "features", as_of=str(p["base"]["as_of"]))
