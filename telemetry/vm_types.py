"""VM size names: the known naming schemes, parsed into what the UM model can use.

The contract sets no format for ``vm_type`` (any non-empty name): a provider's export has names
we never generate, and other clouds name sizes differently. A name in a scheme recognised here
gives a family (the series, prefixed by the scheme so that Azure's ``M`` and AWS's ``m`` stay
apart) and a generation; any other name parses to nothing, and the UM model sees missing values,
which LightGBM routes down its missing branch. No name is ever rejected here.

- Azure: ``Standard_D4s_v3``, ``Standard_B2s``, ``Standard_A1``, ``Standard_E64-32s_v3``
  (constrained vCPU), ``Standard_NC24ads_A100_v4`` (accelerator), ``Standard_DC2s``
  (confidential), ``Standard_D2_v2_Promo``, ``Basic_A1``. A name without ``_v<N>`` is the
  series' first generation.
- AWS: ``m5.xlarge``, ``c6gn.16xlarge``, ``m7i-flex.large``, ``u-6tb1.metal``.
- GCP: ``n2-standard-8``, ``e2-medium``, ``c2d-highcpu-16``, ``a2-highgpu-1g``, ``n2-custom-4-16384``.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import NamedTuple

import pandas as pd

_AZURE = re.compile(
    r"^(?i:standard|basic)_(?P<family>[A-Z]+)(?P<size>\d+)(?:-\d+)?[a-z]*"
    r"(?:_(?!v\d+(?:_|$))[A-Za-z][A-Za-z0-9]*)*(?:_v(?P<generation>\d+))?(?:_(?i:promo))?$")
_AWS = re.compile(
    r"^(?P<family>[a-z]+(?:-\d+tb)?)(?P<generation>\d+)[a-z]*(?:-[a-z]+)?"
    r"\.(?:nano|micro|small|medium|large|\d*xlarge|metal(?:-\d+xl)?)$")
_GCP = re.compile(
    r"^(?P<family>[a-z]+)(?P<generation>\d+)[a-z]?-(?P<kind>[a-z]+)(?:-[a-z0-9]+)*$")
SCHEMES = (("azure", _AZURE), ("aws", _AWS), ("gcp", _GCP))


class VmType(NamedTuple):
    scheme: str          # azure, aws or gcp
    family: str          # scheme/series, e.g. azure/D, aws/m, gcp/n
    generation: float    # Azure v<N> (1 when absent), the digit after an AWS or GCP series


@lru_cache(maxsize=65_536)
def parse_vm_type(name: str) -> VmType | None:
    """The name's scheme, family and generation; None for a name in no known scheme."""
    for scheme, pattern in SCHEMES:
        m = pattern.match(name)
        if m:
            gen = m["generation"]
            return VmType(scheme, f"{scheme}/{m['family']}", float(gen) if gen else 1.0)
    return None


@lru_cache(maxsize=65_536)
def family_of(name: str) -> str | None:
    parsed = parse_vm_type(name)
    return parsed.family if parsed else None


@lru_cache(maxsize=65_536)
def generation_of(name: str) -> float:
    parsed = parse_vm_type(name)
    return parsed.generation if parsed else math.nan


def parse_summary(vm_types: pd.Series) -> dict[str, float]:
    """Share of rows whose name parsed, and the share per scheme (one parse per distinct name)."""
    return parse_counts(vm_types.astype(str).value_counts())


def parse_counts(counts: pd.Series) -> dict[str, float]:
    """``parse_summary`` from the number of rows per name."""
    schemes = pd.Series([getattr(parse_vm_type(t), "scheme", "unparsed") for t in counts.index], index=counts.index)
    per = counts.groupby(schemes).sum() / max(int(counts.sum()), 1)
    out = {f"vm_type_{s}_share": float(per.get(s, 0.0)) for s, _ in SCHEMES}
    out["vm_type_parsed_share"] = float(1.0 - per.get("unparsed", 0.0)) if len(counts) else 0.0
    return out
