"""The configuration reference and the pipeline picture (docs/pipeline.md) are what the code reads."""

from __future__ import annotations

import re

import yaml

from pond.core.docs import params_rows
from pond.core.params import INJECTED_KEYS, Params
from pond.serving.settings import Settings
from tests.conftest import PACKAGES, ROOT, run_pond

REFERENCE = ROOT / "docs" / "configuration.md"

CODE = (*PACKAGES, "scripts", "deploy", "benchmarks", ".ci")
VARIABLE = re.compile(r"\b(?:POND|MLFLOW|PROMETHEUS)_[A-Z0-9_]+")


def _leaves(tree: dict, prefix: str = "") -> list[str]:
    out = []
    for k, v in tree.items():
        out += _leaves(v, f"{prefix}{k}.") if isinstance(v, dict) else [f"{prefix}{k}"]
    return out


def test_committed_docs_are_generated_from_the_code(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    assert run_pond(["docs", "--check"]) == 0, capsys.readouterr().err


def test_every_params_key_is_documented():
    text = REFERENCE.read_text()     # what `pond docs` writes (the test above)
    committed = _leaves(yaml.safe_load((ROOT / "params.yaml").read_text()))
    keys = [k for k, *_ in params_rows(Params, INJECTED_KEYS)]
    every_field = set(_leaves(Params().model_dump())) - {"generate.lab.seed", "generate.fleet.seed", "features.as_of"}
    assert set(committed) <= set(keys) == every_field and len(keys) == len(set(keys)) == 95
    for key in keys:
        assert f"| `{key}` |" in text, key
    assert all(row[4] for row in params_rows(Params, INJECTED_KEYS)), "every key has a meaning"


def test_every_environment_variable_the_code_reads_is_documented():
    text = REFERENCE.read_text()
    read = set()
    for folder in CODE:
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in ("", ".py", ".sh", ".yaml", ".service", ".timer") \
                    and "__pycache__" not in path.parts:
                read |= set(VARIABLE.findall(path.read_text(errors="ignore")))
    read |= {f"POND_{name.upper()}" for name in Settings.model_fields}
    assert {"POND_QOS_THRESHOLD", "POND_MAX_BODY_MB", "POND_DUCKDB_MEMORY", "POND_ROLE"} <= read
    missing = sorted(v for v in read if f"`{v}`" not in text)
    assert missing == []


def test_every_code_block_of_the_docs_is_closed():
    """An unclosed fence swallows the rest of a page as code (README.md had one: a stale `pond report` block
    left after its replacement, 2026-11-28)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for page in pages:
        fences = [n for n, line in enumerate(page.read_text().splitlines(), 1) if line.lstrip().startswith("```")]
        assert len(fences) % 2 == 0, f"{page.relative_to(ROOT)}: {len(fences)} fences (lines {fences}), one never closed"
