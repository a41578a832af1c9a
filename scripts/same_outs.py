"""Are this checkout's pipeline outputs the bytes of another commit's? (a refactor must change no figure)

    dvc repro && python scripts/same_outs.py HEAD      # after `dvc repro` on a change, against the last commit

Compares every stage's ``outs`` md5 in the working ``dvc.lock`` with ``REV:dvc.lock``, prints each one that
differs and, per stage, the code deps whose hashes moved; exits 1 when an output differs. With an MLflow champion
already registered, ``metrics/register.json`` differs by design: reset it (``git checkout metrics/register.json``,
remove ``data/mlflow``) and run ``dvc repro -f -s register`` before comparing.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml


def md5s(lock: dict, stage: str, kind: str) -> dict[str, str | None]:
    return {x["path"]: x.get("md5") for x in lock["stages"].get(stage, {}).get(kind, [])}


def main(rev: str = "HEAD") -> int:
    old = yaml.safe_load(subprocess.run(["git", "show", f"{rev}:dvc.lock"], capture_output=True, text=True,
                                        check=True).stdout)
    new = yaml.safe_load(Path("dvc.lock").read_text())
    differ = 0
    for stage in new["stages"]:
        o, n = md5s(old, stage, "outs"), md5s(new, stage, "outs")
        for path in sorted(set(o) | set(n)):
            if o.get(path) != n.get(path):
                differ += 1
                print(f"OUT DIFFERS {stage} {path} {o.get(path)} -> {n.get(path)}")
        od, nd = md5s(old, stage, "deps"), md5s(new, stage, "deps")
        moved = [p for p in sorted(set(od) | set(nd)) if od.get(p) != nd.get(p)]
        print(f"{stage}: code and inputs moved: {', '.join(moved) or 'none'}")
    print(f"outputs differing from {rev}: {differ}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:2]))
