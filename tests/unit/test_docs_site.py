"""The documentation site builds as CI builds it (`mkdocs build --strict`), lists every page, and loads nothing from
outside itself: an operator reads it on a network without internet."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import yaml

from tests.conftest import ROOT

OUTSIDE = re.compile(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//|@import\s+url\(\s*["']?(?:https?:)?//|url\(\s*["']?https?://""")


def _nav_pages(nav: list) -> list[str]:
    out = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        out += _nav_pages(value) if isinstance(value, list) else [value]
    return out


def test_the_site_builds_strict_with_every_page_in_the_navigation(tmp_path):
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert sorted(_nav_pages(config["nav"])) == sorted(pages)
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
                         check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    built = [p for p in (tmp_path / "site").rglob("*") if p.suffix in (".html", ".css", ".js")]
    assert len([p for p in built if p.suffix == ".html"]) >= len(pages)
    loaded = {p.relative_to(tmp_path / "site").as_posix(): OUTSIDE.findall(p.read_text(errors="ignore"))
              for p in built}
    assert {k: v for k, v in loaded.items() if v} == {}


def test_the_readme_is_a_landing_page_that_stays_in_the_repository():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    for link in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme):
        assert link.startswith(("http://", "https://")) or (ROOT / link).exists(), link


def test_a_page_of_the_docs_links_only_to_pages_of_the_site():
    """mkdocs --strict checks it too; this names the page and the link where a file moved."""
    for page in (ROOT / "docs").rglob("*.md"):
        for link in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if not link.startswith(("http://", "https://", "mailto:")):
                assert (page.parent / link).resolve().is_file() and (page.parent / link).suffix == ".md", \
                    f"{page.relative_to(ROOT)}: {link}"


def test_no_code_and_no_page_but_the_history_names_an_issue_number():
    """A user or a new maintainer has no tracker to look an issue up in: code and pages say why in their own terms.
    docs/changelog.md is the history of the measurements, where the work's order is the point."""
    from tests.conftest import PACKAGES
    issue = re.compile(r"\b[Ii]ssues?\s+#?\d+")                    # across a line break too
    files = [p for d in (*PACKAGES, "benchmarks", "scripts", "deploy", "tests", ".ci") for p in (ROOT / d).rglob("*")
             if p.is_file() and p.suffix in (".py", ".sh", ".md", ".yaml", ".yml", "")]
    files += [ROOT / "README.md", ROOT / "params.yaml", ROOT / "dvc.yaml", ROOT / "mkdocs.yml",
              *(p for p in (ROOT / "docs").rglob("*.md") if p.name != "changelog.md")]
    named = [f"{p.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}" for p in files
             if "__pycache__" not in p.parts and p.name != "test_docs_site.py"
             for text in [p.read_text(errors="ignore")] for m in issue.finditer(text)]
    assert named == []


def test_nothing_refers_to_a_file_outside_the_repository():
    """A clone carries its own design: the notes the project was started from are not in it, so code, tests and
    pages cite the project's own pages instead (docs/design.md, docs/calibration.md, docs/libraries.md). The pattern
    is those notes' upper-case names and the folder beside the repository they sat in."""
    from tests.conftest import PACKAGES
    outside = re.compile(r"\b(?:DESIGN|CALIBRATION|ECOSYSTEM)\.md\b|\.\./shared\b")
    folders = (*PACKAGES, "benchmarks", "scripts", "deploy", "tests", ".ci", "docs")
    files = [p for d in folders for p in (ROOT / d).rglob("*")
             if p.is_file() and p.suffix in (".py", ".sh", ".md", ".yaml", ".yml", "") and "__pycache__" not in p.parts]
    files += [ROOT / n for n in ("README.md", "params.yaml", "dvc.yaml", "mkdocs.yml", "pyproject.toml")]
    found = [f"{p.relative_to(ROOT)}" for p in files if p.name != "test_docs_site.py"
             and outside.search(p.read_text(errors="ignore"))]
    assert found == []
