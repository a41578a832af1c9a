"""`dvc repro` with default params is no slower than before the engine setting.

    python -m benchmarks.repro_speed                       # a7f26f3^ (before `engine`) against HEAD, 2 rounds
    python -m benchmarks.repro_speed --revs HEAD~3 HEAD --rounds 1

Each revision is cloned from this repository into its own work dir, and every stage of its `dvc.yaml` is run
in file order with `dvc repro --force --single-item <stage>` (MLflow in a throw-away SQLite store), with the
clone first on ``PYTHONPATH`` (as ``pond`` through a link, and as its folders for revisions before the one import
root): the `pond` console script would otherwise import the editable install's code. The
revisions alternate within a round, so a machine that slows down over the run slows both alike. Prints, per
revision, each stage's wall time (the median over rounds) and the total, the ratio of the last revision to the
first, which stage outputs differ between the two runs (their `dvc.lock` md5s), and the commits in between whose
committed `dvc.lock` changed an output: later work may have changed what a stage computes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
BEFORE_ENGINE = "a7f26f3^"   # the commit before the `engine` setting


def checkout(rev: str, wd: Path) -> Path:
    sha = subprocess.check_output(["git", "rev-parse", rev], cwd=ROOT, text=True).strip()
    d = wd / sha[:10]
    if not d.exists():
        subprocess.run(["git", "clone", "-q", str(ROOT), str(d)], check=True)
        subprocess.run(["git", "checkout", "-q", sha], cwd=d, check=True)
    return d


def stages(repo: Path) -> list[str]:
    return list(yaml.safe_load((repo / "dvc.yaml").read_text())["stages"])


def import_path(repo: Path) -> str:
    """The clone's packages ahead of the editable install's (which points at this checkout): ``pond`` links to the
    clone; older revisions import the folders themselves."""
    shim = repo.parent / f"{repo.name}-import"
    shim.mkdir(exist_ok=True)
    if not (shim / "pond").exists():
        (shim / "pond").symlink_to(repo, target_is_directory=True)
    return os.pathsep.join([str(shim), str(repo)])


def repro(repo: Path, store: Path) -> dict[str, float]:
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{store}", "PYTHONPATH": import_path(repo)}
    where = subprocess.check_output([sys.executable, "-c", "import pond.core; print(pond.core.__file__)"],
                                    cwd="/", env=env, text=True)
    if not Path(where.strip()).resolve().is_relative_to(repo.resolve()):   # through the shim's link
        raise SystemExit(f"the stages would run {where.strip()}, not {repo}'s code")
    store.unlink(missing_ok=True)
    out = {}
    for s in stages(repo):
        t0 = time.perf_counter()
        subprocess.run(["dvc", "repro", "--force", "--single-item", "--quiet", s], cwd=repo, env=env, check=True,
                       stdout=subprocess.DEVNULL)
        out[s] = time.perf_counter() - t0
    return out


def outs(lock_text: str) -> dict[tuple[str, str], str]:
    lock = yaml.safe_load(lock_text)["stages"]
    return {(s, o["path"]): o.get("md5", "") for s, v in lock.items() for o in v.get("outs", [])}


def differ(a: dict, b: dict) -> list[str]:
    return sorted(f"{s}:{p}" for (s, p) in set(a) | set(b) if a.get((s, p)) != b.get((s, p)))


def _committed_outs(rev: str) -> dict[tuple[str, str], str]:
    return outs(subprocess.check_output(["git", "show", f"{rev}:dvc.lock"], cwd=ROOT, text=True))


def history(first: str, last: str) -> list[tuple[str, list[str]]]:
    """The commits between two revisions whose committed `dvc.lock` changed a stage's outputs."""
    revs = subprocess.check_output(["git", "rev-list", "--reverse", f"{first}..{last}"], cwd=ROOT, text=True).split()
    rows, prev = [], _committed_outs(first)
    for r in revs:
        cur = _committed_outs(r)
        if d := differ(prev, cur):
            subject = subprocess.check_output(["git", "log", "-1", "--format=%h %s", r], cwd=ROOT, text=True)
            rows.append((subject.strip()[:100], d))
        prev = cur
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--revs", nargs="+", default=[BEFORE_ENGINE, "HEAD"])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "pond-repro-speed")
    a = ap.parse_args()
    a.workdir.mkdir(parents=True, exist_ok=True)
    repos = {rev: checkout(rev, a.workdir) for rev in a.revs}
    times: dict[str, list[dict[str, float]]] = {rev: [] for rev in a.revs}
    for k in range(a.rounds):
        for rev in (a.revs if k % 2 == 0 else a.revs[::-1]):
            times[rev].append(repro(repos[rev], a.workdir / f"mlflow-{k}.db"))
            print(f"round {k + 1}, {rev}: {sum(times[rev][-1].values()):.1f} s", flush=True)
    names = list(dict.fromkeys(s for rev in a.revs for s in stages(repos[rev])))
    median = {rev: {s: statistics.median(r[s] for r in times[rev]) for s in names if s in times[rev][0]}
              for rev in a.revs}
    print(f"{'stage':10s} " + " ".join(f"{rev:>12s}" for rev in a.revs))
    for s in names:
        print(f"{s:10s} " + " ".join(f"{median[rev].get(s, float('nan')):12.1f}" for rev in a.revs))
    total = {rev: sum(median[rev].values()) for rev in a.revs}
    print(f"{'total':10s} " + " ".join(f"{total[rev]:12.1f}" for rev in a.revs))
    first, last = a.revs[0], a.revs[-1]
    print(f"{last} / {first}: {total[last] / total[first]:.3f}")
    d = differ(*(outs((repos[rev] / "dvc.lock").read_text()) for rev in (first, last)))
    print("outputs that differ between the two runs:", ", ".join(d) if d else "none")
    for subject, changed in history(first, last):
        print(f"  changed by {subject}...: {', '.join(changed)}")


if __name__ == "__main__":
    main()
