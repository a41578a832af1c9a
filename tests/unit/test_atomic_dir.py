"""Directory swaps: the target names the old or the new directory at every instant and after a
crash; what a killed writer leaves behind is removed by the next writer."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from telemetry.io import AtomicDir, _exchange, remove_leftovers, write_json
from tests.conftest import ROOT


def test_exchange_swaps_two_directories(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (a / "x").write_text("a"), (b / "x").write_text("b")
    if not _exchange(a, b):
        pytest.skip("this file system cannot exchange directories (the two-rename fallback is used)")
    assert (a / "x").read_text() == "b" and (b / "x").read_text() == "a"


def test_readers_never_see_the_target_missing(tmp_path):
    target = tmp_path / "raw"
    with AtomicDir(target) as d:
        (d / "marker").write_text("0")
    if not _exchange(target, target):   # exchanging a path with itself: cheap probe of support
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
        "import os, signal, sys; sys.path.insert(0, sys.argv[1]); from telemetry.io import AtomicDir, write_json\n"
        "write_json(sys.argv[2] + '/metrics.json', {'a': 1})\n"
        "with AtomicDir(sys.argv[2] + '/raw') as d:\n"
        "    open(f'{d}/table', 'w').write('half')\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"), str(ROOT), str(tmp_path)])
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
