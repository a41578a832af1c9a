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
    assert set(committed) <= set(keys) == every_field and len(keys) == len(set(keys)) == 110
    for key in keys:
        assert f"| `{key}` |" in text, key
    assert all(row[4] for row in params_rows(Params, INJECTED_KEYS)), "every key has a meaning"
    types = {key: kind for key, kind, *_ in params_rows(Params, INJECTED_KEYS)}
    assert not [k for k, kind in types.items() if "typing." in kind or "FieldInfo" in kind], "types in words"
    assert types["optimize.pool_cap"] == "number (> 0, <= 1) or null"
    assert types["simulate.pool_caps"] == "list of numbers (> 0, <= 1)"
    assert types["simulate.buy_days"] == "integer (>= 0) or auto"


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


def test_every_command_dvc_runs_and_every_route_has_its_reference_section():
    cli, http = (ROOT / "docs" / "cli.md").read_text(), (ROOT / "docs" / "http-api.md").read_text()
    stages = set(re.findall(r"\bpond (?:--[a-z]+ \S+ )*([a-z_]+)\b", (ROOT / "dvc.yaml").read_text()))
    assert {"generate", "train_monitor", "register"} <= stages
    assert [s for s in sorted(stages) if f"\n## pond {s}\n" not in cli] == []
    from pond.serving.app import create_app
    schema = create_app().openapi()
    routes = [f"{m.upper()} {p}" for p, ops in schema["paths"].items() for m in ops]
    assert {"POST /v1/allocations", "POST /v1/qos"} <= set(routes)
    assert [r for r in routes if f"\n## `{r}`\n" not in http] == []
    assert [n for n in schema["components"]["schemas"] if f"\n### {n}\n" not in http] == []


def test_every_benchmark_and_analysis_has_its_command_in_the_docs():
    page = (ROOT / "docs" / "commands.md").read_text()
    scripts = [p for p in (ROOT / "benchmarks").rglob("*.py") if p.name != "__init__.py"]
    assert len(scripts) > 20
    missing = [p.name for p in scripts
               if f"`python -m {'.'.join(p.relative_to(ROOT).with_suffix('').parts)}`" not in page]
    assert missing == []


def test_the_cli_page_is_the_parser_itself():
    import argparse

    from pond.core.docs import cli_page
    ap = argparse.ArgumentParser(prog="tool", description="Does things.\nMore.")
    ap.add_argument("--params", default="p.yaml", help="params file")
    sub = ap.add_subparsers(dest="stage")
    run = sub.add_parser("run", help="run it")
    run.add_argument("--params", default="p.yaml", help="params file")   # a global option, listed once
    run.add_argument("target", help="what to run")
    run.add_argument("--times", type=int, default=3, help="how often (default %(default)s)")
    run.add_argument("--dry", action="store_true", help="print only")
    page = cli_page(ap)
    expected = ("## tool\n\nDoes things.\n",
                "## tool run\n\nRun it.\n\n```\nusage: tool run [--times TIMES] [--dry] target\n```",
                "| `target` | yes |  | what to run |",
                "| `--times` |  | `3` | how often (default 3) |",     # %(default)s expanded
                "| `--dry` |  |  | print only |")
    assert [text for text in expected if text not in page] == []
    assert page.count("| `--params` |") == 1


def test_the_http_page_names_every_field_with_its_rules():
    from pond.core.docs import http_page
    schema = {"paths": {"/v1/x": {"post": {
        "summary": "Do x", "description": "Why x.",
        "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Req"}}}},
        "responses": {"200": {"description": "OK", "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/Res"}}}}}}}},
        "components": {"schemas": {
            "Req": {"properties": {"n": {"type": "integer", "minimum": 1, "description": "how many"},
                                   "r": {"anyOf": [{"type": "number", "maximum": 10}, {"type": "null"}]}},
                    "required": ["n"]},
            "Res": {"properties": {"d": {"enum": ["a", "b"]}, "xs": {"type": "array", "items": {
                "$ref": "#/components/schemas/Req"}}}}}}}
    rows = {"n": "integer | yes | >= 1 | how many", "r": "number or null |  | <= 10 | ",
            "d": "`a` or `b` |  |  | ", "xs": "list of [Req](#req) |  |  | "}
    page = http_page(schema)
    assert "## `POST /v1/x`\n\nDo x\n\nWhy x.\n\nRequest body (`application/json`): [Req](#req)\n" in page
    assert "- `200` OK: [Res](#res)" in page
    assert [f for f, row in rows.items() if f"| `{f}` | {row} |" not in page] == []
