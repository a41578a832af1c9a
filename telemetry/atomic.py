"""Writing files and folders so that a reader sees the old or the new one whole, never a part, and
nothing else in their place is lost."""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pond.core.errors import ConfigError, name_full_disk

_AT_FDCWD, _RENAME_EXCHANGE = -100, 2


def exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one step (Linux renameat2 RENAME_EXCHANGE); False where the
    system or file system cannot, so that the caller falls back."""
    if sys.platform != "linux":
        return False
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _replace_dir(tmp: Path, target: Path) -> None:
    """Put ``tmp`` in ``target``'s place. Where the system can exchange two directories in one
    step (Linux), ``target`` names the old or the new directory at every instant, also after a
    crash at any point; elsewhere two renames leave a moment without it."""
    if not target.exists():
        os.replace(tmp, target)
    elif exchange(tmp, target):
        shutil.rmtree(tmp, ignore_errors=True)      # tmp now holds the old directory
    else:
        old = target.with_name(f".{target.name}.old-{writer_tag()}-{time.monotonic_ns()}")
        os.replace(target, old)
        os.replace(tmp, target)
        shutil.rmtree(old, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _started(pid: int) -> str | None:
    """When process ``pid`` started, in clock ticks since boot (Linux /proc); None where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def writer_tag() -> str:
    """What a temp or old copy's name says of its writer: the PID, and when that process started. The
    PID alone is not the writer: a PID is reused, and a run in a fresh container gets the PID the killed
    run had, so its leftovers would look like a live writer's and stay."""
    return f"{os.getpid()}-s{_started(os.getpid()) or 0}"


def _writer_gone(parts: list[str]) -> bool:
    """Whether the writer named by a copy's name parts (``tmp``/``old``, PID, ``s`` + start) has ended."""
    pid = int(parts[1])
    if not _alive(pid):
        return True
    tagged = len(parts) >= 3 and parts[2].startswith("s") and parts[2][1:].isdigit()
    if not tagged:                         # a name written before the start time was in it: the PID decides
        return False
    now = _started(pid)
    return now is not None and parts[2][1:] != "0" and now != parts[2][1:]


def remove_leftovers(target: Path) -> list[Path]:
    """Temp and old copies of ``target`` that a killed run left beside it (their writer is gone)."""
    gone = []
    for p in target.parent.glob(f".{target.name}.*"):
        parts = p.name[len(target.name) + 2:].split("-")
        if len(parts) >= 2 and parts[0] in ("tmp", "old") and parts[1].isdigit() and _writer_gone(parts):
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
            gone.append(p)
    return gone


def _no_file_on_the_way(path: Path) -> None:
    """A file where a folder above ``path`` should be is named, not met as a traceback from mkdir."""
    for above in path.parents:
        if above.exists():
            if not above.is_dir():
                raise ConfigError(f"{above} is a file, so nothing can be written at {path}. Fix: name a path "
                                  "under a folder")
            return


def refuse_to_replace(target: Path, holds: Callable[[str], bool] | None) -> None:
    """Refuse a ``target`` whose replacement would lose what the writer did not write: a file, the
    working folder or one above it, or (``holds`` given: a folder the user names) a folder holding other
    files. Checked before anything is written, so a refusal leaves everything as it was."""
    here = Path.cwd().resolve()
    if target.resolve() in (here, *here.parents):
        raise ConfigError(f"{target} is the working folder or one above it, and it would be replaced whole. "
                          f"Fix: name a new folder, e.g. {target / 'out'}")
    _no_file_on_the_way(target)
    if target.exists() and not target.is_dir():
        raise ConfigError(f"{target} is a file, and a folder would replace it. Fix: name a new folder, or remove "
                          "the file")
    others = sorted(p.name for p in target.iterdir() if not holds(p.name)) if holds and target.is_dir() else []
    if others:
        raise ConfigError(f"{target} holds {len(others)} file(s) that replacing the folder whole would lose "
                          f"({', '.join(others[:3])}{', ...' if len(others) > 3 else ''}). Fix: name a new or empty "
                          "folder, or move them out")


class AtomicDir:
    """Context manager yielding a temp dir that replaces ``target`` only if the block succeeds.

    Temp dirs carry the writer's PID; those of writers no longer running (killed mid-write) are
    removed when the next writer of the same target starts. ``holds``: the names an existing
    ``target`` may hold (a folder the user names on the command line); None for a stage's own output."""

    def __init__(self, target: Path | str, holds: Callable[[str], bool] | None = None) -> None:
        self.target, self.holds = Path(target), holds

    def __enter__(self) -> Path:
        refuse_to_replace(self.target, self.holds)
        self.target.parent.mkdir(parents=True, exist_ok=True)
        remove_leftovers(self.target)
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.tmp-{writer_tag()}-", dir=self.target.parent))
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            _replace_dir(self.tmp, self.target)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)
            name_full_disk(exc, self.target)


def write_atomic(path: Path | str, data: bytes | str) -> None:
    path = Path(path)
    _no_file_on_the_way(path)
    if path.is_dir():
        raise ConfigError(f"{path} is a folder, and a file would replace it. Fix: name a file path")
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-{writer_tag()}-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        name_full_disk(exc, path)
        raise


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_json(path: Path | str, obj: Any) -> None:
    write_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=float) + "\n")
