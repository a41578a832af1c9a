"""The reference pages and the pipeline picture (docs/pipeline.md), rendered from what the code reads: the fields of a
pydantic model (params.yaml's, the service's settings, the runtime's environment) as table rows, ``dvc dag``, the
command line's parsers and the service's OpenAPI schema (`pond docs` assembles them; ``pond docs --check`` fails when
the committed files differ)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types as at
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from pond.core.errors import PondError

DAG_BEGIN, DAG_END = "<!-- dvc dag: begin (pond docs) -->", "<!-- dvc dag: end -->"
REPORT_BEGIN, REPORT_END = "<!-- pond report: begin (pond docs, from metrics/) -->", "<!-- pond report: end -->"
MONITOR_BEGIN, MONITOR_END = ("<!-- monitor figures: begin (pond docs, from metrics/train_monitor.json) -->",
                              "<!-- monitor figures: end -->")


def _in_words(metadata: Iterable[Any]) -> list[str]:
    bounds = []
    for m in metadata:
        for cls, attr, op in ((at.Ge, "ge", ">="), (at.Gt, "gt", ">"), (at.Le, "le", "<="), (at.Lt, "lt", "<")):
            if isinstance(m, cls):
                bounds.append(f"{op} {getattr(m, attr):g}")
        if isinstance(m, at.MinLen):
            bounds.append(f"length >= {m.min_length}")
        if isinstance(m, FieldInfo):                    # Annotated[float, Field(gt=0)]: the field's own metadata
            bounds += _in_words(m.metadata)
    return bounds


def allowed(info: FieldInfo) -> str:
    """The constraints pydantic enforces, in words."""
    return ", ".join(_in_words(info.metadata))


TYPE_NAMES = {"str | datetime.date": "date (YYYY-MM-DD)", "float": "number", "int": "integer", "str": "text",
              "bool": "boolean", "NoneType": "null"}


def type_name(annotation: Any) -> str:
    """A params key's type in words: unions, bounds inside a type and lists of them spelled out, never repr'd."""
    origin, args = get_origin(annotation), get_args(annotation)
    text = annotation.__name__ if isinstance(annotation, type) else str(annotation)
    if text in TYPE_NAMES:
        return TYPE_NAMES[text]
    if origin is Literal:
        return " or ".join(str(a) for a in args)
    if origin is Annotated:
        bounds = ", ".join(_in_words(args[1:]))
        return type_name(args[0]) + (f" ({bounds})" if bounds else "")
    if origin in (Union, types.UnionType):
        return " or ".join(type_name(a) for a in args)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        head, _, rest = type_name(args[0]).partition(" (")
        return f"list of {head}s" + (f" ({rest}" if rest else "")
    if origin is tuple and len(set(args)) == 1:
        return f"{len(args)} {type_name(args[0])}s"
    return text


def default_text(info: FieldInfo) -> str:
    if info.default_factory is not None:
        return ""
    value = info.get_default()
    if value is None:
        return "null"
    if isinstance(value, tuple):
        return "[" + ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value) + "]"
    if hasattr(value, "get_secret_value"):
        return "(secret)"
    return f"{value:g}" if isinstance(value, float) else str(value)


def params_rows(model: type[BaseModel], skip: set[str], prefix: str = "") -> list[tuple[str, str, str, str, str]]:
    """(key, type, default, allowed, meaning) of every key ``model`` (params.yaml's) may set, depth first, but
    ``skip``."""
    rows = []
    for name, info in model.model_fields.items():
        key = f"{prefix}{name}"
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            rows += params_rows(annotation, skip, key + ".")
        elif key not in skip:
            rows.append((key, type_name(annotation), default_text(info), allowed(info), info.description or ""))
    return rows


def settings_rows(settings: Any, options: dict[str, str]) -> list[tuple[str, str, str, str]]:
    """(variable, option, default, meaning) of every field of the service's ``settings`` model (``options``: field
    -> its command-line option)."""
    rows = []
    for name, info in settings.model_fields.items():
        bounds = allowed(info)
        meaning = (info.description or "") + (f" ({bounds})" if bounds else "")
        rows.append((settings.env_var(name), options.get(name, ""), default_text(info), meaning))
    return rows


def variable_rows(model: type[BaseModel], more: Iterable[tuple[str, str, str]] = ()) -> list[tuple[str, str, str]]:
    """(variable, default, meaning) of every field of ``model`` (named by its alias), then ``more``."""
    rows = [(info.alias or name, default_text(info) if info.get_default() is not None else "unset",
             info.description or "") for name, info in model.model_fields.items()]
    return rows + list(more)


def table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    cell = lambda v: str(v).replace("|", "\\|")
    return ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)] + \
           ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]


def render_dag(cwd: Path = Path(".")) -> str:
    """``dvc dag --md`` of the repository: a Mermaid flowchart that GitHub draws."""
    dvc = Path(sys.executable).with_name("dvc")
    try:
        out = subprocess.run([str(dvc) if dvc.exists() else "dvc", "dag", "--md"], cwd=cwd, capture_output=True,
                             text=True, check=True, env={**os.environ, "DVC_NO_ANALYTICS": "1"})
    except (OSError, subprocess.CalledProcessError) as exc:
        raise PondError(f"docs: `dvc dag --md` failed ({getattr(exc, 'stderr', exc)}). Fix: install the train "
                        "role (POND_ROLE=train bash scripts/setup.sh) and run from the repository root") from None
    return out.stdout.strip().replace("\t", "    ")


def with_dag(readme: str, dag: str, page: str = "docs/pipeline.md") -> str:
    """The page with the text between the dag markers replaced by ``dag``."""
    return between(readme, DAG_BEGIN, DAG_END, dag, page, "the pipeline picture")


def between(text: str, begin: str, end: str, body: str, page: str, what: str) -> str:
    """``text`` with what stands between the markers ``begin`` and ``end`` replaced by ``body``."""
    if begin not in text or end not in text:
        raise PondError(f"docs: {page} has no {begin} ... {end} markers. Fix: put them back where {what} goes")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body}\n{end}{tail}"


def cli_page(parser: argparse.ArgumentParser, width: int = 100) -> str:
    """The command line's reference (docs/cli.md) from its parsers: the global options, then every command's usage
    and options, in the parser's own order. ``width`` fixes the usage's wrapping, whatever the terminal."""
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help or "" for a in subs._choices_actions}
    out = ["# Command-line reference", "",
           "Generated by `pond docs` from the parsers of `pipelines/cli.py`; `tests/unit/test_reference.py` fails when",
           "this page differs from them. `pond <command> --help` prints the same.", "",
           f"## {parser.prog}", "", parser.description.strip().splitlines()[0] if parser.description else "", "",
           *_options(parser, width, set()), "",
           "Every command also takes these options, before or after its name."]
    shared = {o for a in parser._actions for o in a.option_strings}
    for name, sub in subs.choices.items():
        text = helps.get(name, "")
        out += ["", f"## {sub.prog}", "", text[:1].upper() + text[1:] + ".", ""]
        if sub.description and not sub.description.startswith(text):
            out += [sub.description.strip(), ""]
        out += _options(sub, width, shared)
    return "\n".join(out) + "\n"


def _options(parser: argparse.ArgumentParser, width: int, shared: set[str]) -> list[str]:
    """The usage line, then one row per argument but ``shared`` options (the global ones, listed once)."""
    actions = [a for a in parser._actions if not shared.intersection(a.option_strings)]
    fmt = argparse.HelpFormatter(parser.prog, width=width)
    fmt.add_usage(parser.usage, actions, parser._mutually_exclusive_groups)
    rows = []
    for a in actions:
        if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) or a.help == argparse.SUPPRESS:
            continue
        name = ", ".join(f"`{o}`" for o in a.option_strings) or f"`{a.dest}`"
        text = (a.help or "") % {**vars(a), "prog": parser.prog} if "%(" in (a.help or "") else (a.help or "")
        flag = a.nargs == 0
        default = "" if flag or a.default in (None, argparse.SUPPRESS) else f"`{_plain(a.default)}`"
        needed = a.required if a.option_strings else a.nargs not in ("?", "*")
        rows.append((name, "yes" if needed else "", default, text))
    return ["```", fmt.format_help().strip(), "```", "",
            *(table(("argument", "required", "default", "meaning"), rows) if rows else [])]


def _plain(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value))
    return str(value)


def http_page(schema: dict) -> str:
    """The HTTP API's reference (docs/http-api.md) from the service's OpenAPI schema: every route's purpose, body and
    answers, and every object's fields."""
    defs = dict(schema.get("components", {}).get("schemas", {}))
    out = ["# HTTP API reference", "",
           "Generated by `pond docs` from the service's OpenAPI schema (`pond serve` serves the same at",
           "`/openapi.json`, and browsable at `/docs`); `tests/unit/test_reference.py` fails when this page differs.",
           "Every refusal is a 4xx with FastAPI's `detail` list, each naming the field (`loc`).", ""]
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            out += [f"## `{method.upper()} {path}`", "", op.get("summary", ""), ""]
            if op.get("description"):
                out += [op["description"].strip(), ""]
            body = op.get("requestBody", {}).get("content", {})
            for media, c in body.items():
                s = c.get("schema", {})
                defs.update(s.get("$defs", {}))
                if "properties" in s and "title" in s:        # a body the route parses itself, inlined
                    defs[s["title"]] = {k: v for k, v in s.items() if k != "$defs"}
                    s = {"$ref": f"#/components/schemas/{s['title']}"}
                out += [f"Request body (`{media}`): {_type(s)}", ""]
            for code, r in op.get("responses", {}).items():
                s = next(iter(r.get("content", {}).values()), {}).get("schema", {})
                out += [f"- `{code}` {r.get('description', '')}" + (f": {_type(s)}" if s else "")]
            out += [""]
    out += ["## Objects", ""]
    for name in sorted(defs):
        d = defs[name]
        props = d.get("properties", {})
        out += [f"### {name}", "", *([d["description"].strip(), ""] if d.get("description") else [])]
        if props:
            req = set(d.get("required", []))
            out += [*table(("field", "type", "required", "allowed", "meaning"), [
                (f"`{k}`", _type(v), "yes" if k in req else "", _bounds(v), v.get("description", ""))
                for k, v in props.items()]), ""]
    return "\n".join(out).rstrip() + "\n"


def _type(s: dict) -> str:
    if "$ref" in s:
        name = s["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "anyOf" in s:
        return " or ".join(_type(x) for x in s["anyOf"])
    if "enum" in s:
        return " or ".join(f"`{v}`" for v in s["enum"])
    t = s.get("type", "any")
    if t == "array":
        return f"list of {_type(s.get('items', {}))}"
    if t == "object" and isinstance(s.get("additionalProperties"), dict):
        return f"map of text to {_type(s['additionalProperties'])}"
    return {"string": "text", "number": "number", "integer": "integer", "boolean": "boolean", "null": "null",
            "object": "object"}.get(t, str(t))


def _bounds(s: dict) -> str:
    words = (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<"),
             ("minLength", "length >="), ("maxLength", "length <="), ("minProperties", "entries >="),
             ("maxProperties", "entries <="), ("maxItems", "items <="))
    found = [f"{w} {s[k]:g}" for k, w in words if k in s]
    for x in s.get("anyOf", []):
        found += [f"{w} {x[k]:g}" for k, w in words if k in x]
    return ", ".join(found)


def commands_page(root: Path) -> str:
    """Every benchmark and analysis under ``benchmarks/`` (docs/commands.md): its command, what it measures (its
    docstring's first paragraph, read without importing it) and the pages that quote it."""
    import ast
    import re

    pages = sorted(p for p in (root / "docs").rglob("*.md") if p.name != "commands.md")
    texts = {p.relative_to(root / "docs").as_posix(): p.read_text() for p in pages}
    out = ["# Measuring it again", "",
           "Generated by `pond docs` from the scripts under `benchmarks/`: every figure the docs quote from a",
           "benchmark or a one-off analysis is measured by one of these commands, run from the repository root after",
           "`dvc repro` (each script's `--help` gives its options). Benchmarks back standing claims; the analyses each",
           "answered one question once, and the changelog keeps what they showed.", ""]
    for title, folder in (("Benchmarks", root / "benchmarks"), ("One-off analyses", root / "benchmarks" / "analyses")):
        rows = []
        for path in sorted(folder.glob("*.py")):
            if path.name == "__init__.py":
                continue
            doc = ast.get_docstring(ast.parse(path.read_text())) or ""
            first = " ".join(doc.split("\n\n")[0].split()).rstrip(":")
            module = ".".join(path.relative_to(root).with_suffix("").parts)
            named = re.compile(re.escape(module) + r"(?!\w)|" + re.escape(path.relative_to(root).as_posix()))
            cited = [f"[{page}]({page})" for page, text in texts.items() if named.search(text)]
            rows.append((f"`python -m {module}`", first, ", ".join(cited)))
        out += [f"## {title}", "", *table(("command", "what it measures", "quoted in"), rows), ""]
    return "\n".join(out)
