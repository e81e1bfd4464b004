"""The server's routes, and what every error becomes.

A refusal a route raises (`Problem`), a database that went away, a store that does not answer:
each is one line to the client (`{"error": ...}` under `/api/`, plain text elsewhere) and a
structlog event here. Anything else is a fault of ours: a 500 that says so in one line, logged
with its traceback on our side only. Every request is logged once it is answered (`request`,
at debug).
"""

from __future__ import annotations

import time
from typing import Any

import structlog
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ipc.artifacts.store import StoreError, StoreUnavailable
from supervisor.db.connection import DatabaseProblem
from supervisor.serve import api, pages, reports
from supervisor.serve.context import Problem, Serving

log = structlog.get_logger(__name__)

#: The prefix of answers that are JSON, errors included.
API_PREFIX = "/api/"


def make_app(settings: Serving) -> ASGIApp:
    """The server's ASGI application on `settings`."""
    app = Starlette(
        routes=[
            Route("/", pages.builds_page, methods=["GET"]),
            Route("/builds/{build_id:int}/report", reports.build_report, methods=["GET"]),
            Route("/reports/{rest:path}", reports.report_file, methods=["GET"]),
            Route("/api/builds/{build_id:int}", api.build_json, methods=["GET"]),
            Route("/api/builds/{build_id:int}/review", api.review, methods=["POST"]),
            Route("/favicon.ico", _no_icon, methods=["GET"]),
        ],
        exception_handlers={
            Problem: _problem,
            HTTPException: _http,
            DatabaseProblem: _database,
            StoreError: _store,
            Exception: _fault,
        },
    )
    app.state.serving = settings
    return Answered(app)


def answer(
    request: Request, status: int, line: str, headers: dict[str, str] | None = None
) -> Response:
    """`line` as the answer: JSON under `/api/`, text elsewhere."""
    if request.url.path.startswith(API_PREFIX):
        return JSONResponse({"error": line}, status, headers=headers)
    return PlainTextResponse(line + "\n", status, headers=headers)


async def _no_icon(_request: Request) -> Response:
    """Browsers ask every site for an icon; there is none, and a 404 would be logged in every
    report's console as an error."""
    return Response(status_code=204)


async def _problem(request: Request, error: Exception) -> Response:
    assert isinstance(error, Problem)
    return answer(request, error.status, error.line, dict(error.headers))


async def _http(request: Request, error: Exception) -> Response:
    """Starlette's own refusals: no such route (404), a method the route does not take (405)."""
    assert isinstance(error, HTTPException)
    line = {404: "no such page", 405: f"{request.method} is not taken here"}.get(
        error.status_code, str(error.detail)
    )
    return answer(request, error.status_code, line, dict(error.headers or {}))


async def _database(request: Request, error: Exception) -> Response:
    """The database is away or unusable: the client may try again later (503)."""
    log.warning("database problem", path=request.url.path, error=str(error))
    return answer(request, 503, f"the database cannot be used now: {error}")


async def _store(request: Request, error: Exception) -> Response:
    """The artifact store did not answer (or refused us): the client may try again later."""
    log.warning(
        "artifact store problem",
        path=request.url.path,
        error=str(error),
        transient=isinstance(error, StoreUnavailable),
    )
    return answer(request, 503, f"the artifact store cannot be read now: {error}")


async def _fault(request: Request, error: Exception) -> Response:
    log.error("request failed", method=request.method, path=request.url.path, exc_info=error)
    return answer(request, 500, "the server failed to answer: its log says why")


class Answered:
    """The app, with every request logged once answered, and a fault, already answered and
    logged by `_fault`, kept from the server (which would log its traceback again, unshaped)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.monotonic()
        status: list[int] = []

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception:
            if not status:
                raise
        finally:
            _logged(scope, status, started)


def _logged(scope: Scope, status: list[int], started: float) -> None:
    fields: dict[str, Any] = {
        "method": scope.get("method"),
        "path": scope.get("path"),
        "status": status[0] if status else None,
        "ms": round((time.monotonic() - started) * 1000, 1),
    }
    log.debug("request", **fields)
