"""Telemetry contract, its validation and readers, importers of real formats, and the built-in fleet."""
