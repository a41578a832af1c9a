"""Service settings: a command-line option beats its POND_* variable, which beats the default."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pond.core.errors import ConfigError
from pond.serving.cli import SETTING_OPTIONS, add_setting_options, settings_from
from pond.serving.settings import Settings
from tests.conftest import run_pond


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in ("POND_POLICY", "POND_SNAPSHOT_DIR", "POND_PORT", "POND_HOST", "POND_MLFLOW_TRACKING_URI",
                "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(var, raising=False)


def _options(options: tuple, argv: tuple[str, ...]) -> argparse.Namespace:
    """The options `pond serve` (all) and `pond predict` (the four paths) add, parsed."""
    parser = argparse.ArgumentParser()
    add_setting_options(parser, options)
    return parser.parse_args(argv)


def _serve(*argv: str):
    return settings_from(_options(SETTING_OPTIONS, argv))


def _predict(*argv: str):
    return settings_from(_options(SETTING_OPTIONS[:4], argv))


@pytest.mark.parametrize("make", [_serve, _predict])
def test_flag_over_environment_over_default(make, monkeypatch):
    assert make().policy == Path("data/policy/policy.json")
    monkeypatch.setenv("POND_POLICY", "/env/policy.json")
    monkeypatch.setenv("POND_SNAPSHOT_DIR", "/env/snapshot")
    s = make()
    assert s.policy == Path("/env/policy.json") and s.snapshot_dir == Path("/env/snapshot")
    s = make("--policy", "/flag/policy.json")
    assert s.policy == Path("/flag/policy.json") and s.snapshot_dir == Path("/env/snapshot")


def test_host_and_port(monkeypatch):
    assert (_serve().host, _serve().port) == ("127.0.0.1", 8000)
    monkeypatch.setenv("POND_PORT", "9001")
    monkeypatch.setenv("POND_HOST", "127.0.0.2")
    assert (_serve().host, _serve().port) == ("127.0.0.2", 9001)
    assert (_serve("--host", "::1", "--port", "9002").host, _serve("--port", "9002").port) == ("::1", 9002)


def test_bad_setting_names_it(monkeypatch):
    monkeypatch.setenv("POND_PORT", "eighty")
    with pytest.raises(ConfigError, match="setting port"):
        _serve()


def test_tracking_uri_from_either_variable(monkeypatch):
    assert Settings().mlflow_tracking_uri == "sqlite:///data/mlflow/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow:5000")
    assert Settings().mlflow_tracking_uri == "http://mlflow:5000"
    monkeypatch.setenv("POND_MLFLOW_TRACKING_URI", "http://pond-mlflow:5000")
    assert Settings().mlflow_tracking_uri == "http://pond-mlflow:5000"


def test_help_names_the_variables(capsys):
    with pytest.raises(SystemExit):
        run_pond(["serve", "--help"])
    out = capsys.readouterr().out
    for var in ("POND_POLICY", "POND_LI_DIR", "POND_UM_DIR", "POND_SNAPSHOT_DIR", "POND_HOST", "POND_PORT"):
        assert var in out


def test_database_registry_uri_without_sql_store_says_how_to_fix(monkeypatch):
    import importlib.util

    from pond.serving.reload import check_registry_uri

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "sqlalchemy" else real(name, *a))
    for uri in ("sqlite:///data/mlflow/mlflow.db", "postgresql+psycopg2://u@db/mlflow"):
        with pytest.raises(ConfigError, match="MLflow server"):
            check_registry_uri(uri)
    check_registry_uri("http://127.0.0.1:5000")       # what the serve install follows
