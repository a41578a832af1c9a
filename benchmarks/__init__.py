"""Scripts that measure the figures README.md and docs/ quote; run each from the repository root as
``python -m benchmarks.<name>`` (its docstring says which claim it backs). One-off analyses whose figures
docs/changelog.md keeps are in ``benchmarks/analyses`` (a line each on what they showed)."""
