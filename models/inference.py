"""Loading the exported models for scoring: ONNX sessions checked against the policy's sha256."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pandas as pd

from pond.core.errors import ModelError
from pond.models.policy import Policy
from pond.models.runtime import p_insensitive_rows, session, sha256
from pond.models.um import HEAD, UmEncoder
from pond.telemetry.request import HISTORY_KEY as KEY


def read_verified(path: Path, expected_sha256: str) -> bytes:
    data = path.read_bytes()
    got = sha256(data)
    if got != expected_sha256:
        raise ModelError(f"{path}: sha256 {got[:12]}... does not match the policy's {expected_sha256[:12]}...; "
                         "re-run `dvc repro` so the policy and the models come from the same night")
    return data


def load_verified(path: Path, expected_sha256: str) -> ort.InferenceSession:
    return session(read_verified(path, expected_sha256))


@dataclass(frozen=True)
class ModelFiles:
    """A policy's two models as verified ONNX bytes and what scoring needs besides. An ONNX Runtime
    session cannot be pickled; these can, so a Dask task carries them and loads its own sessions."""
    li: bytes
    li_features: list[str]
    li_classes: list[int]
    um: bytes
    um_vocabulary: dict[str, list[str]]
    um_customer_columns: list[str]

    @classmethod
    def from_policy(cls, policy: Policy, li_dir: Path, um_dir: Path) -> ModelFiles:
        um_manifest = json.loads((um_dir / "manifest.json").read_text())
        features = um_manifest["features"]
        if features[:len(HEAD)] != HEAD:
            raise ModelError(f"{um_dir / 'manifest.json'}: UM features {features[:len(HEAD)]} are not {HEAD}: "
                             "the model was trained by another version of the code; rerun `dvc repro`")
        return cls(read_verified(li_dir / policy.li.model, policy.li.sha256), policy.li.features,
                   policy.li.classes, read_verified(um_dir / policy.um.model, policy.um.sha256),
                   um_manifest["vocabulary"], features[len(HEAD):])

    def load(self) -> Models:
        return Models(session(self.li), self.li_features, self.li_classes, session(self.um),
                      UmEncoder(self.um_vocabulary, self.um_customer_columns))


@dataclass
class Models:
    li: ort.InferenceSession | None
    li_features: list[str]
    li_classes: list[int]
    um: ort.InferenceSession | None
    um_encoder: UmEncoder

    @classmethod
    def from_policy(cls, policy: Policy, li_dir: Path, um_dir: Path) -> Models:
        return ModelFiles.from_policy(policy, li_dir, um_dir).load()

    def p_insensitive(self, history_features: pd.DataFrame) -> np.ndarray:
        """P(insensitive) from workload-history features (rows with NaN everywhere -> NaN)."""
        X = history_features.reindex(columns=self.li_features).to_numpy(np.float32)
        return p_insensitive_rows(self.li, X, self.li_classes)

    def um_raw(self, vms: pd.DataFrame) -> np.ndarray:
        """Raw UM predictions for VMs with their request fields and customer columns (vm_features)."""
        X = self.um_encoder.encode(vms)
        if len(X) == 0:
            return np.zeros(0)
        return self.um.run(None, {"X": X})[0].ravel().astype(float)


@dataclass
class Scores:
    has_history: np.ndarray
    p_insensitive: np.ndarray
    um_raw: np.ndarray


def join_history(vms: pd.DataFrame, history: pd.DataFrame) -> pd.DataFrame:
    """Each VM's row of the history snapshot (NaN where it has none), in ``vms``' order, one per VM:
    a snapshot that holds a key twice would score a VM twice, so it is refused by name."""
    try:
        return vms[list(KEY)].merge(history, on=list(KEY), how="left", validate="many_to_one")
    except pd.errors.MergeError:
        twice = history.loc[history.duplicated(list(KEY), keep=False), list(KEY)].head(3).to_dict("records")
        raise ModelError(f"the workload history snapshot holds {'/'.join(KEY)} more than once (e.g. {twice}); "
                         "it is not one `pond features` wrote: run `pond features` again to rebuild it") from None


def score(models: Models, vms: pd.DataFrame, history: pd.DataFrame) -> Scores:
    """Both models on VM requests, each enriched with its workload history (snapshot ``history``)."""
    enriched = join_history(vms, history)
    return Scores(enriched["n_vms"].notna().to_numpy(), models.p_insensitive(enriched), models.um_raw(vms))


def score_files(files: ModelFiles, vms: pd.DataFrame, history: pd.DataFrame) -> Scores:
    """``score`` with sessions of its own: one Dask task's share of the VMs."""
    return score(files.load(), vms, history)


def score_in_parts(run: Callable[[Callable, list[tuple]], list], files: ModelFiles, vms: pd.DataFrame,
                   history: pd.DataFrame, parts: int) -> Scores:
    """``score`` of ``vms`` cut into ``parts`` consecutive slices, one ``run`` task each (a Dask
    cluster's workers), joined in order: every score is a function of its own row (the history join,
    both ONNX models), so the answer is the one ``score`` gives on the whole."""
    bounds = np.unique(np.linspace(0, len(vms), max(parts, 1) + 1).astype(int))
    got = run(score_files, [(files, vms.iloc[a:b], history) for a, b in itertools.pairwise(bounds)])
    if not got:
        return score(files.load(), vms, history)
    return Scores(*(np.concatenate([getattr(g, f) for g in got]) for f in ("has_history", "p_insensitive", "um_raw")))
