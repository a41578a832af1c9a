"""Directory swaps: the target names the old or the new directory at every instant and after a
crash; what a killed writer leaves behind is removed by the next writer."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from pond.core.errors import ConfigError
from pond.telemetry.atomic import AtomicDir, exchange, remove_leftovers, write_atomic, write_json, writer_tag
from pond.telemetry.io import holds_tables
from tests.conftest import ROOT, run_pond


def test_exchange_swaps_two_directories(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (a / "x").write_text("a"), (b / "x").write_text("b")
    if not exchange(a, b):
        pytest.skip("this file system cannot exchange directories (the two-rename fallback is used)")
    assert (a / "x").read_text() == "b" and (b / "x").read_text() == "a"


def test_readers_never_see_the_target_missing(tmp_path):
    target = tmp_path / "raw"
    with AtomicDir(target) as d:
        (d / "marker").write_text("0")
    if not exchange(target, target):   # exchanging a path with itself: cheap probe of support
        pytest.skip("no RENAME_EXCHANGE here")
    missing, stop = [], threading.Event()

    def read() -> None:
        while not stop.is_set():
            if not (target / "marker").exists():
                missing.append(1)

    reader = threading.Thread(target=read)
    reader.start()
    for i in range(300):
        with AtomicDir(target) as d:
            (d / "marker").write_text(str(i))
    stop.set()
    reader.join()
    assert missing == [] and (target / "marker").read_text() == "299"


def test_a_killed_writer_leaves_the_old_data_and_its_leftovers_are_removed(tmp_path):
    target = tmp_path / "raw"
    with AtomicDir(target) as d:
        (d / "table").write_text("old")
    killed = subprocess.run([sys.executable, "-c", (
        "import os, signal, sys; from pond.telemetry.atomic import AtomicDir, write_json\n"
        "write_json(sys.argv[1] + '/metrics.json', {'a': 1})\n"
        "with AtomicDir(sys.argv[1] + '/raw') as d:\n"
        "    open(f'{d}/table', 'w').write('half')\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"), str(tmp_path)], check=False)
    assert killed.returncode == -9
    assert (target / "table").read_text() == "old"
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith(".raw.tmp-")]
    assert len(left) == 1
    mine = tmp_path / f".raw.tmp-{__import__('os').getpid()}-x"    # a live writer's temp dir is kept
    mine.mkdir()
    assert remove_leftovers(target) == [tmp_path / left[0]]
    assert mine.exists() and (target / "table").read_text() == "old"
    write_json(tmp_path / "metrics.json", {"a": 2})
    assert sorted(p.name for p in tmp_path.iterdir()) == [mine.name, "metrics.json", "raw"]


def _untouched(tmp_path):
    return sorted((str(p.relative_to(tmp_path)), p.read_bytes() if p.is_file() else b"") for p in tmp_path.rglob("*"))


@pytest.mark.parametrize("out, fragment", [
    ("keep", "holds 1 file(s) that replacing the folder whole would lose (notes.txt)"),   # a folder of the user's
    ("tables", "holds 1 file(s) that replacing the folder whole would lose (vms.csv)"),   # the user's edited rows
    (".", "the working folder or one above it"),
    ("..", "the working folder or one above it"),
    ("afile", "afile is a file, and a folder would replace it"),
    ("afile/raw", "afile is a file, so nothing can be written at afile/raw"),
])
def test_a_folder_is_replaced_only_where_nothing_else_would_be_lost(tmp_path, monkeypatch, capsys, out, fragment):
    """`pond template ~/notes` used to replace the folder whole, and a file given as the folder too."""
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "notes.txt").write_text("precious")
    (tmp_path / "afile").write_text("also precious")
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "vms.csv").write_text("the user's rows, in place of the template's")
    monkeypatch.chdir(tmp_path)
    before = _untouched(tmp_path)
    assert run_pond(["--params", str(ROOT / "params.yaml"), "template", out]) == 2
    err = capsys.readouterr().err
    assert fragment in err and "Fix:" in err and len(err.strip().splitlines()) == 1, err
    assert _untouched(tmp_path) == before


def test_a_folder_of_tables_is_replaced_and_a_stage_output_is_replaced_whatever_it_holds(tmp_path):
    tables = tmp_path / "raw"
    with AtomicDir(tables, holds_tables) as d:
        (d / "vms.csv").write_text("1")
        (d / "vm_counters").mkdir()
    with AtomicDir(tables, holds_tables) as d:         # an import over the last one
        (d / "vms.parquet").write_text("2")
    assert [p.name for p in tables.iterdir()] == ["vms.parquet"]
    (tables / "notes.txt").write_text("x")
    with pytest.raises(ConfigError, match="notes.txt"):
        AtomicDir(tables, holds_tables).__enter__()
    with AtomicDir(tables) as d:                        # a stage's own output (DVC's): no such check
        (d / "model.onnx").write_text("3")
    assert [p.name for p in tables.iterdir()] == ["model.onnx"]


def test_a_file_is_not_written_over_a_folder(tmp_path):
    (tmp_path / "metrics").mkdir()
    with pytest.raises(ConfigError, match="is a folder, and a file would replace it"):
        write_atomic(tmp_path / "metrics", "{}")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ConfigError, match="afile is a file, so nothing can be written"):
        write_atomic(tmp_path / "afile" / "m.json", "{}")
    assert (tmp_path / "afile").read_text() == "x" and (tmp_path / "metrics").is_dir()


def test_a_killed_writers_leftovers_go_even_when_its_pid_is_taken_again(tmp_path):
    """A run killed in one container and re-run in a fresh one gets the same PID: the leftovers of the killed
    run looked like a live writer's (this process's own) and stayed beside the outputs. The name
    also says when its writer started, so a PID that is alive but started later is not that writer."""
    target = tmp_path / "um"
    pid = os.getpid()
    reused = tmp_path / f".um.tmp-{pid}-s1-abc"          # this PID, started at tick 1: another process than this
    reused.mkdir()
    live = tmp_path / f".um.tmp-{writer_tag()}-def"      # this very process: a live writer
    live.mkdir()
    legacy = tmp_path / f".um.tmp-{pid}-ghi"             # a name with no start time: the PID decides
    legacy.mkdir()
    assert remove_leftovers(target) == [reused]
    assert live.exists() and legacy.exists()
    with AtomicDir(target) as d:
        assert d.name.startswith(f".um.tmp-{writer_tag()}-")
        (d / "um.onnx").write_text("m")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, legacy.name, "um"])
