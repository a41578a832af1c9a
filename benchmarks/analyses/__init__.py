"""One-off analyses: each answered one question once, and docs/changelog.md keeps its figures (the section
named beside it). They stay runnable (``python -m benchmarks.analyses.<name>``) so a figure can be measured again;
none backs a standing claim of the README the way ``benchmarks/`` does.

- ``regret_anatomy``: where a 14-night backtest's regret comes from, LI against UM ("Where the regret
  comes from"); the replay the regret analyses build on.
- ``fleet_labels``: whether slowdown labels from the fleet would close that regret (a what-if).
- ``history_spread``: where the fleet's LI errors come from, and the history rule at 0.95 that removes most of them
  ("Where the fleet's LI errors come from").
- ``served_um_nights``: whether the served UM-only policy's evidence bounds its next day.
- ``resolve_runs``: this checkout's solver re-choosing on the saved nights of finished acceptance runs.
- ``fleet_reports``: the fleet's slowdown reports (``vm_slowdowns``) as evidence, on those saved nights.
- ``sizing_diagnosis``: why the optimized policy did not save DRAM in ``simulate``.
- ``monitor_evidence``: how well the QoS monitor's flags stand for the LI error rate on the fleet.
- ``lab_draws``: why ``pond calibrate``'s lab checks pass on few draws ("Calibration over draws").
- ``li_selection``: the LI selection criterion on both built-in variants, held out, at FP 2%.
- ``onnx_nodes``: the UM model's ONNX node count, ours against onnxmltools' conversion (why we export our own).
"""
