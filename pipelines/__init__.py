"""Thin stage entry points (one per DVC stage) and the `pond` CLI that names them all."""
