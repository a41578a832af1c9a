"""The acceptance run's ``--set``: any params key for every run, and a typo refused before hours of nights."""

from __future__ import annotations

import pytest

from benchmarks.backtest_variants import with_sets


def test_a_set_key_takes_its_yaml_value():
    params = {"optimize": {"credit_mitigation": False, "pool_cap": None}, "base": {"seed": 42}}
    got = with_sets(params, ["optimize.credit_mitigation=true", "optimize.pool_cap=0.2", "base.seed=43"])
    assert got == {"optimize": {"credit_mitigation": True, "pool_cap": 0.2}, "base": {"seed": 43}}


@pytest.mark.parametrize("item", ["optimize.credit_mitigatoin=true", "optimise.tp=97", "optimize.tp", "seed=1"])
def test_a_key_params_does_not_have_is_refused(item):
    with pytest.raises(SystemExit, match="--set"):
        with_sets({"optimize": {"tp": 98}}, [item])
