"""serving/protocol.py subclasses uvicorn's internal ``HttpToolsProtocol``: a uvicorn that renames a hook or an
attribute it relies on would leave the limits silently off (the hook never called) or fail on the first request.
These checks fail first, and pyproject.toml accepts only the uvicorn minor version they were written for."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from uvicorn.protocols.http import httptools_impl
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from pond.serving.protocol import BoundedHttpToolsProtocol

ROOT = Path(__file__).resolve().parents[2]
OURS = {"configure"}                                   # methods of our own, not hooks


def overridden() -> list[str]:
    return sorted(n for n, v in vars(BoundedHttpToolsProtocol).items()
                  if callable(v) and not n.startswith("_") and n not in OURS)


def test_the_overrides_are_known():
    assert overridden() == ["connection_lost", "connection_made", "data_received", "on_header",
                            "on_headers_complete", "on_message_begin", "on_message_complete", "on_url",
                            "send_400_response"]


@pytest.mark.parametrize("name", overridden())
def test_every_overridden_hook_is_uvicorns_with_the_same_parameters(name):
    base = getattr(HttpToolsProtocol, name, None)
    assert base is not None, f"uvicorn's HttpToolsProtocol has no {name}: serving/protocol.py's override is dead"
    ours = getattr(BoundedHttpToolsProtocol, name)
    assert list(inspect.signature(ours).parameters) == list(inspect.signature(base).parameters), name


def test_the_attributes_the_protocol_reads_are_set_by_uvicorn():
    source = inspect.getsource(httptools_impl)
    for attr in ("loop", "transport", "headers", "cycle"):
        assert f"self.{attr} = " in source, f"HttpToolsProtocol no longer sets self.{attr}"
    cycle = inspect.getsource(RequestResponseCycle.__init__)
    for attr in ("more_body", "response_started"):
        assert f"self.{attr} = " in cycle, f"RequestResponseCycle no longer sets self.{attr}"


def test_pyproject_accepts_only_the_uvicorn_the_overrides_were_written_for():
    import tomllib
    from importlib.metadata import version

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["serve"]
    spec = next(Requirement(r) for r in extras if Requirement(r).name == "uvicorn").specifier
    installed = Version(version("uvicorn"))
    assert installed in spec
    assert Version(f"{installed.major}.{installed.minor + 1}.0") not in spec    # the next minor is not assumed
    assert Version(f"{installed.major}.{installed.minor - 1}.0") not in spec
