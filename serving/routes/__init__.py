"""The service's routers: the scheduler's allocation calls, and the operator's endpoints."""
