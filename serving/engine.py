"""The serving engine: one night's models, policy and feature snapshot, applied to VM requests.

No web framework here: the HTTP app, the ``predict`` CLI and the benchmarks call this engine,
and both of its paths end in the rule ``evaluate`` uses (``models.decision``) and encode the
UM inputs with the encoder training used (``models.um.UmEncoder``):
- ``allocate`` takes columns of requests (batches, files): one UM model run and one compiled
  decision loop for all of them;
- ``allocate_one`` takes one request (the scheduler's call): plain dict look-ups, one float32
  row, the scalar rule. On one VM, the columnar path spends most of its time in a dozen small
  numpy calls; this one spends it in ONNX Runtime, or in nothing much on a cache hit.
Tests check that both equal training's encoding and each other, field for field.

P(insensitive) depends only on the workload history of (customer, VM type, region), which is
fixed for a snapshot: the forest scores every history key once, when the engine is built, and a
request looks its key up. The UM prediction depends only on the request's fields and the
snapshot: ``allocate_one`` keeps it per distinct request (``um_cache``), prefilled at load with
the snapshot's recent request shapes, and ``allocate`` looks a batch's shapes up there too (up to
``UM_CACHE_ENTRIES`` requests; a larger file job runs the model on every row).
A value the models never saw (customer, VM type, region, OS, cluster) is a missing input, never
an error: an unknown customer gets the no-history inputs, exactly as in training.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from itertools import repeat
from pathlib import Path
from time import perf_counter
from typing import Any

import numpy as np
import pandas as pd

from pond.core.errors import InputFormatError, ModelError
from pond.features.tma import REQUIRED_EVENTS, pmu_features
from pond.models.bundle import BundlePaths
from pond.models.decision import PolicyKnobs, decide, decide_one, policy_knobs, served_name
from pond.models.inference import Models
from pond.models.monitor_runtime import MonitorModel
from pond.models.policy import Policy, load_policy
from pond.telemetry import request
from pond.telemetry.atomic import sha256_file
from pond.telemetry.request import HISTORY_KEY as KEY

NAN = float("nan")
# Distinct requests whose UM prediction allocate_one keeps; emptied when full. VMs are deployed in
# groups and customers repeat their sizes: with the snapshot's recent shapes predicted at load,
# 97.5% of the built-in fleet's requests on the served day are repeats, and a repeat costs a dict
# look-up instead of an ONNX Runtime run (benchmarks/serving.py reports the share).
UM_CACHE_ENTRIES = 65_536


def verify_snapshot(snapshot_dir: Path) -> tuple[dict[str, Any], bytes]:
    """The snapshot's manifest and its bytes, every file it lists checked against its sha256 (a
    snapshot written before the manifest listed files is taken as it is)."""
    manifest_path = snapshot_dir / "manifest.json"
    try:
        data = manifest_path.read_bytes()
        manifest = json.loads(data)
    except FileNotFoundError:
        raise ModelError(f"{manifest_path} not found: run `dvc repro` (or point the service at a bundle)") from None
    except (OSError, ValueError) as exc:
        raise ModelError(f"{manifest_path} is not readable JSON ({type(exc).__name__}); rerun `dvc repro`") from None
    files = manifest.get("files", {}) if isinstance(manifest, dict) else None
    if not isinstance(files, dict):
        raise ModelError(f"{manifest_path}: field files must map file names to sha256; rerun `dvc repro`")
    for name, digest in files.items():
        path = snapshot_dir / Path(str(name)).name
        if not path.is_file() or sha256_file(path) != digest:
            raise ModelError(f"{path}: missing, or its sha256 differs from {manifest_path}'s field files.{name}: "
                             "the snapshot was altered or half-written; rerun `dvc repro`")
    return manifest, data


def _rows_of(cols: dict[str, Any], rows: np.ndarray) -> dict[str, Any]:
    """The request columns of some rows (``cols`` as ``allocate`` takes them)."""
    take = rows.tolist()
    return {c: None if v is None else np.asarray(v)[rows] if isinstance(v, np.ndarray) else [v[i] for i in take]
            for c, v in cols.items()}


def version_of(policy_bytes: bytes, manifest_bytes: bytes) -> str:
    """Identity of what is served: the policy (which pins both model hashes) and the snapshot's manifest."""
    h = hashlib.sha256(policy_bytes)
    h.update(manifest_bytes)
    return h.hexdigest()[:12]


def bundle_version(paths: BundlePaths) -> str:
    """``version_of`` the files as they are now (the poller's cheap check for a new bundle)."""
    return version_of(paths.policy.read_bytes(), (paths.snapshot_dir / "manifest.json").read_bytes())


@dataclass(frozen=True)
class Engine:
    """Immutable (its UM cache only memoizes its own models): a request reads the current engine
    once and uses nothing else, so a swap never mixes versions."""

    version: str
    policy: Policy
    models: Models
    knobs: PolicyKnobs
    knob_floats: tuple[float, float, float]   # knobs.floats(), as allocate_one passes them
    snapshot: dict[str, Any]
    history_p: dict[tuple[str, str, str], float]  # P(insensitive) per history key (NaN: no usable features)
    customer_index: dict[str, int]
    customer_features_nohist: np.ndarray        # cust_* per known customer, then the no-history row (float32)
    customer_rows: tuple[tuple[float, ...], ...]  # the same rows as Python floats, for allocate_one
    um_cache: dict[tuple, float]                # request fields -> UM prediction (this engine's models only)
    qos_threshold: float                        # the LI model's flag threshold, where there is no monitor model
    monitor: MonitorModel | None                # the QoS monitor's model of counters under an allocation
    info: dict[str, Any]                        # what GET /v1/model reports
    policy_summary: dict[str, Any]              # what each allocation echoes

    @classmethod
    def load(cls, paths: BundlePaths, qos_threshold: float = 0.5, label: str | None = None) -> Engine:
        """Load and verify (sha256) both models, score the history table, warm both sessions."""
        policy, policy_bytes = load_policy(paths.policy)
        snapshot, manifest_bytes = verify_snapshot(paths.snapshot_dir)
        models = Models.from_policy(policy, paths.li_dir, paths.um_dir)
        monitor = MonitorModel.load(paths.monitor_dir)
        history = pd.read_parquet(paths.snapshot_dir / "workload_history.parquet")
        customers = pd.read_parquet(paths.snapshot_dir / "customer_percentiles.parquet")
        cust_cols = models.um_encoder.customer_columns
        missing = [c for c in ["customer_id", *cust_cols] if c not in customers.columns]
        if missing:
            raise ModelError(f"{paths.snapshot_dir / 'customer_percentiles.parquet'} lacks columns {missing} the UM "
                             "model was trained on: the snapshot and the model come from different features."
                             "percentiles; rerun `dvc repro`")
        keys = list(zip(*(history[k].astype(str) for k in KEY)))
        p_hist = models.p_insensitive(history).tolist() if len(history) else []
        # the last row: a customer with no ended VMs in the window (cust_n = 0, percentiles missing),
        # which is how features/customer.py presents it to the model in training
        cust = np.vstack([customers[cust_cols].to_numpy(np.float32),
                          [[0.0] + [NAN] * (len(cust_cols) - 1)]]).astype(np.float32)
        version = label or version_of(policy_bytes, manifest_bytes)   # of what was read, not of the files now
        knobs = policy_knobs(policy)["served"]
        engine = cls(
            version=version, policy=policy, models=models, knobs=knobs, knob_floats=knobs.floats(),
            snapshot=snapshot, um_cache={},
            history_p=dict(zip(keys, p_hist)),
            customer_index={c: i for i, c in enumerate(customers["customer_id"].astype(str))},
            customer_features_nohist=cust, customer_rows=tuple(map(tuple, cust.tolist())),
            qos_threshold=qos_threshold, monitor=monitor,
            info={"version": version, "as_of": policy.as_of, "li_sha256": policy.li.sha256,
                  "um_sha256": policy.um.sha256, "monitor_sha256": monitor.sha256 if monitor else None,
                  "history_keys": len(keys), "customers": len(customers),
                  "snapshot_time": snapshot.get("snapshot_time")},
            policy_summary={"served": served_name(policy), "li_threshold": knobs.li_threshold,
                            "um_target_op": _served_target(policy, knobs), "um_offset": knobs.um_offset,
                            "pool_cap": knobs.pool_cap, "pdm": policy.pdm, "tp": policy.tp,
                            "latency_ratio": policy.latency_ratio, "as_of": policy.as_of},
        )
        shapes_path = paths.snapshot_dir / "request_shapes.parquet"
        if shapes_path.exists():   # older snapshots have none: the cache starts empty
            cache = engine.predict_shapes(pd.read_parquet(shapes_path).head(UM_CACHE_ENTRIES // 4))
            engine = replace(engine, um_cache=cache, info={**engine.info, "prefilled_shapes": len(cache)})
        engine.warm()
        return engine

    def predict_shapes(self, shapes: pd.DataFrame) -> dict[tuple, float]:
        """UM predictions of request shapes (features.build.request_shapes) in one run, keyed as
        allocate_one looks them up. Each shape is also predicted for a customer the snapshot does
        not know (their UM inputs are all the same), so a new customer on a known shape is a hit."""
        if not len(shapes):
            return {}
        anyone = shapes.assign(customer_id="").drop_duplicates(subset=list(request.SHAPE))  # "" is never a customer
        shapes = pd.concat([shapes, anyone], ignore_index=True)
        cols = request.columns_of(shapes)
        cols["vcpus"], cols["memory_gb"] = cols["vcpus"].tolist(), cols["memory_gb"].tolist()
        raw = self.models.um.run(None, {"X": self.um_inputs(cols)})[0].ravel().astype(np.float64).tolist()
        ids = shapes["customer_id"].astype(str)
        who = ids.astype(object).where(ids.isin(list(self.customer_index)), None).tolist()
        keys = zip(who, cols["vm_type"], cols["vcpus"], cols["memory_gb"], cols["os"], cols["region"], cols["cluster_id"])
        return dict(zip(keys, raw))

    def warm(self) -> None:
        """First runs allocate ORT buffers (and compile the decision rule); do them before traffic."""
        probe = {"vm_id": ["warm"], "customer_id": ["?"], "vm_type": ["Standard_D2s_v3"], "vcpus": [2],
                 "memory_gb": [8.0], "os": ["linux"], "region": ["?"], "cluster_id": [None]}
        for _ in range(3):
            self.allocate(probe)
            self.allocate_one(*(probe[c][0] for c in request.SHAPE))

    # -- requests -> model inputs -------------------------------------------------------------

    def um_inputs(self, cols: dict[str, Any]) -> np.ndarray:
        """float32 UM matrix in the model's feature order (equal to training's ``UmEncoder.encode``)."""
        n = len(cols["vm_type"])
        cust = np.fromiter(map(self.customer_index.get, cols["customer_id"], repeat(-1)), dtype=np.int64, count=n)
        tail = self.customer_features_nohist[np.where(cust >= 0, cust, -1)]
        return np.concatenate([self.models.um_encoder.head(cols), tail], axis=1)

    def um_row(self, customer_id: str, vm_type: str, vcpus: float, memory_gb: float, os: str, region: str,
               cluster_id: str | None) -> list[float]:
        """One request's UM inputs (equal to a row of ``um_inputs``)."""
        return [*self.models.um_encoder.head_row(vm_type, vcpus, memory_gb, os, region, cluster_id),
                *self.customer_rows[self.customer_index.get(customer_id, -1)]]

    def allocate(self, cols: dict[str, list], timings: dict[str, float] | None = None,
                 refused: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Decisions for request columns (``telemetry.request.columns_of``), validated upstream.

        ``timings`` (if given) receives seconds spent to enrich, infer and decide; ``refused``: per request,
        no LI call (``serving.flag_memory``).
        """
        t0 = perf_counter()
        n = len(cols["vm_type"])
        keys = list(zip(cols["customer_id"], cols["vm_type"], cols["region"]))
        has_history = np.fromiter(map(self.history_p.__contains__, keys), dtype=bool, count=n)
        p = np.fromiter(map(self.history_p.get, keys, repeat(NAN)), dtype=np.float64, count=n)
        known = np.fromiter(map(self.customer_index.__contains__, cols["customer_id"]), dtype=bool, count=n)
        mem = np.asarray(cols["memory_gb"], dtype=np.float64)
        raw, t1 = self._um_raw(cols, known, mem)
        t2 = perf_counter()
        if refused is not None:
            p = np.where(refused, NAN, p)
        out = decide(mem, has_history, p, raw, self.knobs)
        out.update(memory_gb=mem, p_insensitive=p, has_history=has_history, customer_history=known)
        if timings is not None:
            timings.update(enrich=t1 - t0, infer=t2 - t1, decide=perf_counter() - t2)
        return out

    def _um_raw(self, cols: dict[str, Any], known: np.ndarray, mem: np.ndarray) -> tuple[np.ndarray, float]:
        """``allocate``'s UM predictions, and when encoding ended. A request batch (up to ``UM_CACHE_ENTRIES``)
        looks its shapes up in ``um_cache`` and runs the model once per shape not there; a file job runs all."""
        n = len(known)
        raw, miss, shapes = np.full(n, NAN), np.arange(n), None
        if n <= UM_CACHE_ENTRIES:
            who = np.where(known, np.asarray(cols["customer_id"], dtype=object), None).tolist()
            clusters = repeat(None) if cols["cluster_id"] is None else cols["cluster_id"]
            shapes = list(zip(who, cols["vm_type"], np.asarray(cols["vcpus"], dtype=np.float64).tolist(), mem.tolist(),
                              cols["os"], cols["region"], clusters))    # allocate_one's keys
            raw = np.fromiter(map(self.um_cache.get, shapes, repeat(NAN)), dtype=np.float64, count=n)
            miss = np.flatnonzero(np.isnan(raw))
        if shapes is not None and len(miss):   # each shape not seen runs once, however often the batch repeats it
            unseen = dict(zip(map(shapes.__getitem__, miss.tolist()), miss.tolist()))
            rows = np.fromiter(unseen.values(), dtype=np.int64, count=len(unseen))
        else:
            rows = miss
        X = self.um_inputs(cols if len(rows) == n else _rows_of(cols, rows)) if len(rows) else None
        t1 = perf_counter()
        if X is not None:
            raw[rows] = self.models.um.run(None, {"X": X})[0].ravel()
        if shapes is not None and len(rows):
            if len(self.um_cache) + len(rows) > UM_CACHE_ENTRIES:
                self.um_cache.clear()
            fresh = dict(zip(unseen, raw[rows].tolist()))
            self.um_cache.update(fresh)         # (another thread may empty the cache: read from fresh)
            raw[miss] = np.fromiter(map(fresh.__getitem__, map(shapes.__getitem__, miss.tolist())), dtype=np.float64,
                                    count=len(miss))
        return raw, t1

    def allocate_one(self, customer_id: str, vm_type: str, vcpus: float, memory_gb: float, os: str, region: str,
                     cluster_id: str | None = None, timings: dict[str, float] | None = None,
                     refused: bool = False) -> dict[str, Any]:
        """``allocate`` for one request, with the same fields as Python scalars (validated upstream).

        ``timings`` (if given) receives seconds to enrich and decide, and to infer when the UM
        model ran: its prediction is kept per distinct request (see ``um_cache``). ``refused``: no LI call.
        """
        t0 = perf_counter()
        vcpus, memory_gb = float(vcpus), float(memory_gb)
        p = self.history_p.get((customer_id, vm_type, region))
        known = customer_id in self.customer_index
        # customers the snapshot does not know share their UM inputs (no history), so they share entries
        key = (customer_id if known else None, vm_type, vcpus, memory_gb, os, region, cluster_id)
        raw = self.um_cache.get(key)
        if raw is None:
            X = np.array([self.um_row(customer_id, vm_type, vcpus, memory_gb, os, region, cluster_id)], np.float32)
            t1 = perf_counter()
            raw = float(self.models.um.run(None, {"X": X})[0][0, 0])
            t2 = perf_counter()
            if len(self.um_cache) >= UM_CACHE_ENTRIES:
                self.um_cache.clear()
            self.um_cache[key] = raw
            if timings is not None:
                timings["infer"] = t2 - t1
        else:
            t1 = t2 = perf_counter()
        has_history = p is not None
        p = p if has_history and not refused else NAN
        d = decide_one(memory_gb, has_history, p, raw, self.knob_floats)
        if timings is not None:
            timings.update(enrich=t1 - t0, decide=perf_counter() - t2)
        return {"decision": d.decision, "memory_gb": memory_gb, "local_gb": d.local_gb, "pool_gb": d.pool_gb,
                "znuma_gb": d.znuma_gb, "p_insensitive": p,
                "untouched_fraction": d.untouched_fraction, "has_history": has_history,
                "customer_history": known}

    # -- QoS ----------------------------------------------------------------------------------

    def qos(self, counters: dict[str, float], memory_gb: float, pool_gb: float,
            latency_ratio: float | None = None) -> QosVerdict:
        """P(the VM exceeds the PDM where it runs now) from counters counted under its allocation, and whether to
        act: by the monitor's model, or, in a bundle without one, by the LI model on the same counters."""
        events = list(self.snapshot.get("events", []))
        reads = self.monitor is not None and self.monitor.events is not None
        missing = [e for e in (self.monitor.needs(events) if reads else REQUIRED_EVENTS) if e not in counters]
        if missing:
            raise InputFormatError(f"counters: events {missing} are required "
                                   + ("by the QoS monitor's model" if reads else "for the TMA metrics"))
        unknown = sorted(set(counters) - set(events) - set(REQUIRED_EVENTS))
        if unknown:
            raise InputFormatError(f"counters: unknown events {unknown[:5]}; use the event names of the lab list")
        row = pd.DataFrame([{e: counters.get(e, NAN) for e in dict.fromkeys([*events, *REQUIRED_EVENTS])}])
        if self.monitor is not None:
            ratio = self.policy.latency_ratio if latency_ratio is None else latency_ratio
            p = float(self.monitor.p_exceeds(row, events, np.array([pool_gb / memory_gb]), np.array([ratio]))[0])
            threshold = self.monitor.threshold(ratio, whole=pool_gb >= memory_gb)   # all on the pool: a call
            return QosVerdict(p, p >= threshold, "pool_counters", threshold, self.monitor.pdm)
        p_ins = float(self.models.p_insensitive(pmu_features(row, events, table="counters"))[0])
        p_exceed = 1.0 - p_ins if np.isfinite(p_ins) else 1.0
        return QosVerdict(p_exceed, p_exceed >= self.qos_threshold, "li_model", self.qos_threshold, self.policy.pdm)


@dataclass(frozen=True)
class QosVerdict:
    p: float                  # P(exceeds the PDM)
    exceeds: bool
    monitor: str              # pool_counters | li_model: which model scored the counters
    threshold: float
    pdm: float


def _served_target(policy: Policy, knobs: PolicyKnobs) -> float | None:
    """The OP target behind the served UM offset (None: the served policy does not use UM)."""
    if knobs.um_offset is None:
        return None
    if policy.serve.policy == "um_only":
        return policy.alternatives["um_only"].um_target_op
    return policy.um.target_op
