"""Size names of every cloud parse where a scheme is known, and never fail where none is."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from pond.telemetry.vm_types import family_of, generation_of, parse_summary, parse_vm_type


@pytest.mark.parametrize("name, family, generation", [
    ("Standard_D4s_v3", "azure/D", 3), ("Standard_B2s", "azure/B", 1), ("Standard_A1", "azure/A", 1),
    ("Standard_E64-32s_v3", "azure/E", 3), ("Standard_NC24ads_A100_v4", "azure/NC", 4),
    ("Standard_DC2s", "azure/DC", 1), ("Standard_D2_v2_Promo", "azure/D", 2), ("Basic_A1", "azure/A", 1),
    ("Standard_DC4as_cc_v5", "azure/DC", 5), ("Standard_HC44-16rs", "azure/HC", 1),
    ("m5.xlarge", "aws/m", 5), ("c6gn.16xlarge", "aws/c", 6), ("m7i-flex.large", "aws/m", 7),
    ("u-6tb1.metal", "aws/u-6tb", 1), ("t3.micro", "aws/t", 3),
    ("n2-standard-8", "gcp/n", 2), ("e2-medium", "gcp/e", 2), ("c2d-highcpu-16", "gcp/c", 2),
    ("a2-highgpu-1g", "gcp/a", 2), ("n2-custom-4-16384", "gcp/n", 2),
])
def test_known_schemes(name, family, generation):
    assert parse_vm_type(name) is not None
    assert family_of(name) == family and generation_of(name) == generation


@pytest.mark.parametrize("name", ["custom type", "Standard_", "", "D4s_v3", "4xlarge", "x" * 500, "Stándard_D4_v3"])
def test_any_other_name_is_missing_values_not_an_error(name):
    assert parse_vm_type(name) is None
    assert family_of(name) is None and math.isnan(generation_of(name))


def test_clouds_do_not_share_families():
    assert family_of("Standard_M64s_v2") != family_of("m6.xlarge") != family_of("m1-ultramem-40")


def test_parse_summary_counts_rows_not_names():
    s = parse_summary(pd.Series(["Standard_D4s_v3"] * 3 + ["m5.xlarge", "n2-standard-8", "??", "??", "??"]))
    assert s == {"vm_type_azure_share": 3 / 8, "vm_type_aws_share": 1 / 8, "vm_type_gcp_share": 1 / 8,
                 "vm_type_parsed_share": 5 / 8}
