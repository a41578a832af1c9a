"""`pond predict` and `pond serve`: the engine from files, offline or behind HTTP."""

from __future__ import annotations

import argparse
import logging

from models.bundle import BundlePaths
from serving.engine import Engine
from serving.offline import predict_file
from serving.settings import Settings


def _settings(args: argparse.Namespace) -> Settings:
    """Environment (POND_*) first, then whatever the command line sets explicitly."""
    overrides = {"policy": args.policy, "li_dir": args.li, "um_dir": args.um, "snapshot_dir": args.snapshot}
    for key in ("host", "port"):
        if getattr(args, key, None) is not None:
            overrides[key] = getattr(args, key)
    return Settings(**overrides)


def run(args: argparse.Namespace) -> int:
    settings = _settings(args)
    if args.stage == "predict":
        engine = Engine.load(BundlePaths(settings.policy, settings.li_dir, settings.um_dir, settings.snapshot_dir),
                             settings.qos_threshold)
        frame = predict_file(engine, args.requests, args.out)
        counts = frame.decision.value_counts().to_dict()
        print(f"predict: {len(frame)} allocations -> {args.out} (model {engine.version}; {counts})")
        return 0
    import uvicorn

    from serving.app import create_app
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = create_app(settings)
    uvicorn.run(app, host=settings.host, port=settings.port, workers=1, log_level="info", access_log=False,
                proxy_headers=False)
    return 0
