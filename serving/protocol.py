"""uvicorn's httptools protocol, with the limits a service on an exposed address needs.

httptools buffers a request's headers whole and waits for a request forever, so a client could
hold megabytes of headers in memory or keep a connection open by trickling bytes. Here:
- the request line and headers may take ``max_header_bytes`` and ``max_headers`` (431 beyond);
- a request must arrive whole within ``read_timeout_s`` of its first byte (408 otherwise; the
  idle time between requests is uvicorn's ``timeout_keep_alive``).
Refusals are short JSON answers and the connection is closed.

And one thing for speed: uvicorn writes a response's head and body in two writes, each a system
call; ``CoalescedWrites`` sends what one turn of the event loop wrote in one. Under wrk the two
writes were a third of a worker's time (docs/changelog.md, "Where a single request's time goes").
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

REASONS = {408: b"Request Timeout", 431: b"Request Header Fields Too Large"}


class CoalescedWrites:
    """A transport whose writes in one turn of the event loop leave in one write at its end.

    Everything else is the transport's own; a close sends what is pending first, and nothing is
    written once the transport is closing (the peer left before the turn ended).
    """

    __slots__ = ("_loop", "_pending", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport, self._loop, self._pending = transport, loop, []

    def write(self, data: bytes) -> None:
        if not self._pending:
            self._loop.call_soon(self.flush)
        self._pending.append(data)

    def flush(self) -> None:
        if self._pending:
            data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
            self._pending.clear()
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    max_header_bytes = 32 * 1024
    max_headers = 100
    read_timeout_s = 15.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(CoalescedWrites(transport, asyncio.get_running_loop()))  # type: ignore[arg-type]
        self._head_bytes = self._raw_head = self._begun = 0
        self._in_head = True
        self._deadline: asyncio.TimerHandle | None = None
        self._refusal: tuple[int, str] | None = None

    # Head size is counted two ways: the exact bytes of the request line and each header as the
    # parser hands them over, and whole reads that continue a head still incomplete, i.e. reads during
    # which no request began and none finished its head (httptools buffers a header until it ends,
    # so a giant one is refused while it is still arriving).
    def _check_head(self) -> None:
        if max(self._head_bytes, self._raw_head) > self.max_header_bytes and self._refusal is None:
            self._refusal = (431, f"request line and headers exceed {self.max_header_bytes} bytes")

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._deadline is None:
            self._deadline = self.loop.call_later(self.read_timeout_s, self._too_slow)
        in_head_before, begun_before = self._in_head, self._begun
        super().data_received(data)
        if in_head_before and self._in_head and self._begun == begun_before and not self.transport.is_closing():
            self._raw_head += len(data)
            self._check_head()
            if self._refusal is not None:
                self._refuse(*self._refusal)

    def on_message_begin(self) -> None:
        self._head_bytes = self._raw_head = 0
        self._begun += 1
        self._in_head = True
        super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        self._head_bytes += len(url)
        self._check_head()
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_bytes += len(name) + len(value) + 4
        self._check_head()
        if len(self.headers) >= self.max_headers and self._refusal is None:
            self._refusal = (431, f"more than {self.max_headers} headers")
        if self._refusal is not None:
            raise ValueError(self._refusal[1])      # httptools stops; send_400_response sends the refusal
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        self._in_head = True                        # the next bytes begin the next request
        super().on_message_complete()

    def send_400_response(self, msg: str) -> None:
        if self._refusal is not None:
            return self._refuse(*self._refusal)
        super().send_400_response(msg)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        cycle: Any = self.cycle
        if self._in_head or (cycle is not None and cycle.more_body and not cycle.response_started):
            self._refuse(408, f"the request did not arrive within {self.read_timeout_s:g} s")

    def _refuse(self, status: int, detail: str) -> None:
        self._disarm()
        if self.transport.is_closing():
            return
        body = json.dumps({"detail": detail}).encode()
        self.transport.write(b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
                             b"connection: close\r\n\r\n%s" % (status, REASONS[status], len(body), body))
        self.transport.close()


    @classmethod
    def configure(cls, max_header_bytes: int, max_headers: int, read_timeout_s: float) -> None:
        """Set the limits of every connection this process accepts from now on (uvicorn imports the
        class by name in each worker, so they cannot travel as a class built at run time)."""
        cls.max_header_bytes, cls.max_headers, cls.read_timeout_s = max_header_bytes, max_headers, read_timeout_s


PROTOCOL = f"{__name__}:BoundedHttpToolsProtocol"
