"""Opportunistic micro-batching of single allocation requests.

Under concurrent load, the requests that arrive while the event loop is busy are run through the
engine together: one UM model run and one vectorized decision for all of them, instead of one
each. Nothing waits for a batch to fill: a request that arrives alone runs alone, at once. Each
request carries the engine it read on arrival, and requests are grouped by engine, so a swap
never mixes versions within an answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from serving.engine import Engine


class MicroBatcher:
    def __init__(self, run: Callable[[Engine, list[Any]], list[dict]], max_batch: int = 256):
        self.run, self.max_batch = run, max_batch
        self._pending: list[tuple[Engine, Any, asyncio.Future]] = []
        self._scheduled = False

    async def submit(self, engine: Engine, request: Any) -> dict:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._pending.append((engine, request, fut))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return await fut

    def _flush(self) -> None:
        self._scheduled = False
        pending, self._pending = self._pending[:self.max_batch], self._pending[self.max_batch:]
        if self._pending:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)
        groups: dict[int, list[tuple[Engine, Any, asyncio.Future]]] = {}
        for item in pending:
            groups.setdefault(id(item[0]), []).append(item)
        for items in groups.values():
            try:
                results = self.run(items[0][0], [req for _, req, _ in items])
            except Exception as exc:   # reaches each waiting request, never the loop
                for _, _, fut in items:
                    if not fut.done():
                        fut.set_exception(exc)
                continue
            for (_, _, fut), res in zip(items, results):
                if not fut.done():
                    fut.set_result(res)
