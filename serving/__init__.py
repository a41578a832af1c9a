"""Serving: the FastAPI + ONNX Runtime zNUMA allocation service."""
