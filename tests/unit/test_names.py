"""Model, policy and per-ratio names have one definition (``models.names``), and it is the one the stages use."""

from __future__ import annotations

import re

from pond.models import names
from tests.conftest import PACKAGES, ROOT


def test_names_by_example():
    assert names.li_model_name(1.82, 5.0) == names.li_model_name(1.82, 5) == "r1.82_pdm5"
    assert names.li_model_name(2.22, 7.5) == "r2.22_pdm7.5"
    assert names.at_ratio("combined", 1.82) == "combined_r1.82" and names.at_ratio("policy", 2.0) == "policy_r2"
    assert [names.static_policy_name(f) for f in (0.1, 0.15, 0.3, 0.5)] == [
        "static_10pct", "static_15pct", "static_30pct", "static_50pct"]


def test_a_fraction_is_named_as_rounded_not_truncated():
    """``int(0.29 * 100)`` is 28: evaluate named 0.29's policy static_28pct where simulate said static_29pct."""
    assert int(0.29 * 100) == 28 and names.static_policy_name(0.29) == "static_29pct"
    assert names.static_policy_name(0.57) == "static_57pct" and names.static_policy_name(0.58) == "static_58pct"
    assert names.split_ratio("combined_r1.82") == ("combined", "1.82") and names.split_ratio("static_15pct")[1] is None
    assert names.split_ratio(names.at_ratio("um_only", 2.22)) == ("um_only", "2.22")
    assert names.split_ratio("pool_rack") == ("pool_rack", None) and names.split_ratio("_r1") == ("_r1", None)


def test_no_stage_or_evaluation_module_spells_a_name_itself():
    spelled = re.compile(r'f"static_\{|f"r\{ratio|f"[^"]*_pdm\{|f"[a-z_]*_r\{')
    offenders = [f"{p.relative_to(ROOT)}:{i}" for d in ("pipelines", "simulator", "evaluation", "optimize", "serving", "benchmarks")
                 for p in sorted((ROOT / d).glob("*.py")) for i, line in enumerate(p.read_text().splitlines(), 1)
                 if spelled.search(line)]
    assert not offenders, offenders


def test_a_bundle_folder_is_laid_out_by_one_owner():
    """A night's or a bundle's ``policy.json`` is found through ``models.bundle.BundlePaths`` (the file
    name was spelled in 9 files); the CLI's and the service's default paths are documentation, not joins."""
    joins = [f"{p.relative_to(ROOT)}:{i}" for d in PACKAGES
             for p in sorted((ROOT / d).rglob("*.py"))
             for i, line in enumerate(p.read_text().splitlines(), 1)
             if '/ "policy.json"' in line and p.relative_to(ROOT).as_posix() != "models/bundle.py"]
    assert not joins, joins
