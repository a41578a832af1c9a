"""The framework's ceiling for the serving benchmark: a bare Starlette route that echoes its JSON
body, served by the same uvicorn (httptools, uvloop) as `pond serve`."""

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


async def echo(request: Request) -> Response:
    return Response(await request.body(), media_type="application/json")


async def ping(request: Request) -> Response:
    return Response(b"ok")


app = Starlette(routes=[Route("/echo", echo, methods=["POST"]), Route("/ping", ping)])
