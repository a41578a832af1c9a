"""What the registry records of a night: the version (its gate decision as tags, its alias) and the night's MLflow
run, closed with the figures a promotion is judged on.

A version's run is the night's parent run (``core.night_run``), so the UI links a version to the night that made it,
and two versions compare by their nights' headline figures (``evaluation.compare.headline``, the figures `pond
compare` prints) and the parameters that decide a promotion, not by the stages' hyper-parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from pond.core import night_run
from pond.core.errors import ModelError
from pond.core.params import QosParams
from pond.core.tracking import not_found
from pond.evaluation.compare import headline
from pond.evaluation.next_day import bundle_on
from pond.models.decision import served_name
from pond.models.policy import Policy
from pond.telemetry.storage import Location

CHAMPION, CHALLENGER = "champion", "challenger"


def champion_on(bundle_dir: Path, vms: pd.DataFrame, raw_dir: Location, qos: QosParams
                ) -> tuple[dict[str, Any] | None, str | None]:
    """``next_day.bundle_on`` of the champion, or (None, why) where this code cannot read it: a bundle written by
    another version of the code (a rollback) could not be served by this one either, so tonight's is judged without
    it rather than the night failing on the version it would replace."""
    try:
        return bundle_on(bundle_dir, vms, raw_dir, qos), None
    except ModelError as exc:
        return None, str(exc).split("; do not edit")[0]


@dataclass(frozen=True)
class Verdict:
    """The gate's answer for tonight's bundle."""

    promote: bool
    reason: str
    champion_version: str | None = None

    @property
    def alias(self) -> str:
        return CHAMPION if self.promote else CHALLENGER


def version_tags(policy: Policy, evaluation_day: str, candidate: dict[str, Any], info: dict[str, Any],
                 verdict: Verdict) -> dict[str, str]:
    tags = {"as_of": policy.as_of, "evaluation_day": evaluation_day, "served_policy": served_name(policy),
            "realized.mispredictions": f"{candidate['mispredictions_conservative']:.6f}",
            "realized.pool_share": f"{candidate['pool_share']:.6f}", "li_sha256": info["li_sha256"],
            "um_sha256": info["um_sha256"], "gate.decision": verdict.alias, "gate.reason": verdict.reason}
    if verdict.champion_version is not None:
        tags["gate.champion_version"] = verdict.champion_version
    return tags


def record(client: Any, name: str, model: Any, night_id: str, tags: dict[str, str], verdict: Verdict) -> Any:
    """A new version of ``name`` from ``model`` (MLflow's ModelInfo of the logged bundle), run = the night, with
    the verdict's alias moved to it. The ModelVersion."""
    mv = client.create_model_version(name, source=model.model_uri, run_id=night_id, tags=tags,
                                     model_id=model.model_id)
    client.set_registered_model_alias(name, verdict.alias, mv.version)
    return mv


def close_night(client: Any, night_id: str, bundle_dir: Path, policy: Policy, version: str,
                verdict: Verdict) -> str:
    """Close the night as ``night <as-of>`` with its headline figures; the run id that holds them."""
    figures = {k: v for k, v in headline(bundle_dir).items() if v is not None}
    params = {"as_of": policy.as_of, "served_policy": served_name(policy), "latency_ratio": policy.latency_ratio,
              "pdm": policy.pdm, "tp": policy.tp, "misprediction_budget": policy.misprediction_budget,
              "li_threshold": policy.li.threshold, "um_target_op": policy.um.target_op}
    tags = {"as_of": policy.as_of, "served_policy": served_name(policy), "registered_version": version,
            "gate.decision": verdict.alias, "gate.reason": verdict.reason}
    return night_run.close(client, night_id, f"night {policy.as_of}", {**figures, "promoted": float(verdict.promote)},
                           params, tags)


# MLflow 3's UI opens every experiment in the browser's last mode, GenAI's overview by default, whatever the
# experiment's kind tag says: links into the nightly runs name the model-training mode themselves.
MODE = "workflowType=machine_learning"


def ui_links(client: Any, base: str, experiment: str, model: str) -> dict[str, str]:
    """Links into the MLflow UI at ``base``: the experiment's runs, the last two nights side by side, the champion's
    version page (the ones that exist)."""
    import json
    from urllib.parse import quote

    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return {}
    eid = exp.experiment_id
    links = {"runs": f"{base}/#/experiments/{eid}/runs?{MODE}"}
    nights = client.search_runs([eid], filter_string=f"tags.`{night_run.KIND_TAG}` = '{night_run.NIGHT}' and "
                                                     "attributes.status = 'FINISHED'",
                                order_by=["attributes.start_time DESC"], max_results=2)
    if len(nights) == 2:
        ids = quote(json.dumps([r.info.run_id for r in nights]))
        links["last two nights"] = f"{base}/#/compare-runs?runs={ids}&experiments={quote(json.dumps([eid]))}&{MODE}"
    try:
        champion = client.get_model_version_by_alias(model, CHAMPION)
    except Exception as exc:
        if not not_found(exc):      # no registered model or no champion yet: no link; anything else is an error
            raise
    else:
        links["champion"] = f"{base}/#/models/{model}/versions/{champion.version}?{MODE}"
    return links
