"""params.yaml is one validated object: one place for defaults, no unknown key, no silent drift."""

from __future__ import annotations

import pytest
import yaml

from pond.core.errors import ConfigError
from pond.core.params import OptimizeParams, Params, load
from tests.conftest import ROOT


def test_committed_params_are_the_code_defaults():
    # the fields' defaults are the only ones in the code; params.yaml states each of them, so DVC
    # tracks every value a stage uses and no reader of either can be misled
    assert load(ROOT / "params.yaml") == Params()
    assert set(yaml.safe_load((ROOT / "params.yaml").read_text())) == set(Params.model_fields)


@pytest.mark.parametrize("section, values, message", [
    ({"train_um": {"alphaz": [0.1]}}, None, "train_um.alphaz: Extra inputs are not permitted"),
    ({"features": {"percentiles": [50, 75, 75]}}, None, "features.percentiles: must be distinct"),
    ({"features": {"percentiles": [99, 50]}}, None, "features.percentiles"),
    ({"features": {"percentiles": [50, 100]}}, None, "features.percentiles"),
    ({"features": {"window_days": 0}}, None, "features.window_days"),
    ({"features": {"as_of": "2026-01-01"}}, None, "features.as_of is set by base.as_of"),
    ({"generate": {"fleet": {"seed": 3}}}, None, "generate.fleet.seed is set by base.seed"),
    ({"base": {"as_of": "yesterday"}}, None, "base.as_of: not a date"),
    ({"train_um": {"calib_days": 20}}, None, "calib_days + calib_lag_days must be < train_days"),
    ({"optimize": {"latency_ratio": 3.0}}, None, "train_li trains ratios"),
    ({"optimize": {"tp": 101}}, None, "optimize.tp"),
    ({"simulate": {"pool_sockets": "many"}}, None, "simulate.pool_sockets"),
    ({"simulate": {"pool_caps": [0.15, 0]}}, None, "simulate.pool_caps"),
    ({"optimize": {"serve": "everything"}}, None, "optimize.serve: Input should be 'answer', 'combined', 'li_only', 'um_only' or 'all_local'"),
    ({"optimize": {"pool_cap": 1.5}}, None, "optimize.pool_cap"),
    ({"simulate": {"buy_days": -1}}, None, "simulate.buy_days"),
    ({"simulate": {"fallback_cap": 0}}, None, "simulate.fallback_cap"),
    ({"simulate": {"buy_days": "weeks"}}, None, "Input should be 'auto' (got 'weeks')"),
    ({"shiny": {}}, None, "shiny: Extra inputs are not permitted"),
])
def test_bad_params_fail_naming_the_key(section, values, message):
    with pytest.raises(ConfigError, match="params.yaml") as err:
        Params(**section)
    assert message in str(err.value)


def test_base_values_reach_the_sections_that_use_them():
    p = Params(base={"seed": 7, "as_of": "2026-02-03"})
    assert p.generate.lab.seed == p.generate.fleet.seed == 7 and p.features.as_of == "2026-02-03"
    night = p.with_as_of("2026-01-30")
    assert night.base.as_of == night.features.as_of == "2026-01-30" and night.base.seed == 7
    assert night.train_um == p.train_um


def test_percentiles_give_the_customer_columns():
    assert Params(features={"percentiles": [50, 75]}).features.customer_columns == ["cust_n", "cust_p50", "cust_p75"]


def test_load_refuses_a_file_that_is_not_a_mapping(tmp_path):
    (tmp_path / "p.yaml").write_text("- just\n- a list\n")
    with pytest.raises(ConfigError, match="one mapping"):
        load(tmp_path / "p.yaml")
    (tmp_path / "q.yaml").write_text("base: {seed: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load(tmp_path / "q.yaml")


def test_the_budget_is_the_share_of_vms_outside_tp():
    assert OptimizeParams(tp=98).budget == pytest.approx(0.02) and OptimizeParams(tp=100).budget == 0.0


def test_pond_engine_overrides_the_files_backend_where_params_are_loaded(tmp_path):
    from pond.core.params import load

    (tmp_path / "p.yaml").write_text("engine:\n  backend: local\n")
    assert load(tmp_path / "p.yaml").engine.backend == "local"
    assert load(tmp_path / "p.yaml", "dask").engine.backend == "dask"
    assert load(tmp_path / "p.yaml", "dask").base == load(tmp_path / "p.yaml").base

