"""`python -m supervisor serve`: builds and reports over HTTP, with review (`supervisor.serve`).

It listens on loopback unless told otherwise (`--address`), reads builds from the database and
reports from the artifact store (folder or bucket), and takes review decisions from whoever holds
`STORYSHELF_REVIEW_TOKEN`; without one it is read-only and says so. Settings it cannot use (an
address that does not parse or is taken, a bucket that refuses it) are one line on stderr and
exit 2, before it serves anything; it then runs until SIGTERM or Ctrl-C, and exits 0.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket

import structlog
import uvicorn

from ipc.artifacts.location import is_remote
from ipc.artifacts.store import StoreRefused, StoreUnavailable
from supervisor.commands.options import open_database, option
from supervisor.db.connection import DatabaseProblem
from supervisor.logs import complain
from supervisor.metrics.address import AddressError, parse_address
from supervisor.serve.app import make_app
from supervisor.serve.auth import TOKEN_VARIABLE, token_from
from supervisor.serve.context import Serving
from supervisor.serve.server import address_of, is_loopback, listening, route_uvicorn_logs, server

log = structlog.get_logger(__name__)

#: Loopback: a server that takes decisions is opened to a network only when asked.
DEFAULT_ADDRESS = "127.0.0.1:8080"

EPILOG = f"""review:
  Set {TOKEN_VARIABLE} in serve's environment to take decisions from the report's buttons and
  POST /api/builds/ID/review (Authorization: Bearer <token>); without it the server is
  read-only and each report shows the review command to run.

exit status:
  0  stopped by SIGTERM or Ctrl-C
  1  the database cannot be used
  2  a setting is wrong: the address, a port in use, a store that refuses"""


def address(text: str) -> tuple[str, int]:
    """`HOST:PORT` (`supervisor.metrics.address`), for argparse."""
    try:
        return parse_address(text)
    except AddressError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not HOST:PORT (such as {DEFAULT_ADDRESS}; port 0 picks one)"
        ) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `python -m supervisor serve`."""
    option(
        parser,
        "--address",
        address,
        DEFAULT_ADDRESS,
        f"HOST:PORT to listen on (default {DEFAULT_ADDRESS}, loopback; port 0 picks one)",
    )


def execute(args: argparse.Namespace) -> int:
    """Listen, then serve until told to stop."""
    host, port = args.address
    try:
        sock = listening(host, port)
    except OSError as error:
        why = error.strerror or error
        complain("serve", f"--address {host}:{port}: cannot listen there: {why}")
        return 2
    try:
        return _serve(args, sock)
    finally:
        sock.close()


def _stop_quietly(running: uvicorn.Server) -> None:
    """SIGTERM and SIGINT ask `running` to stop whenever they come, by a flag and never by an
    exception. uvicorn catches them only while it serves; one that came before (between the
    `serving` line and its handlers) would otherwise kill the process, or raise
    `KeyboardInterrupt` wherever the interpreter stood, half through building the event loop
    included. uvicorn raises the ones it caught again once it has stopped, under these
    handlers: then they only set the flag again."""

    def stop(_number: int, _frame: object) -> None:
        running.should_exit = True

    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, stop)


def _serve(args: argparse.Namespace, sock: socket.socket) -> int:
    """Serve on `sock`, listening already, until told to stop."""
    store = args.artifacts
    if is_remote(store.location):
        try:
            store.check()
        except StoreRefused as error:
            complain("serve", str(error))
            return 2
        except StoreUnavailable as error:
            # Reports are read per request: one the store cannot give now is a 503 then.
            log.warning("artifact store not answering", error=str(error))
    try:
        engine = open_database(args.database_url)
    except DatabaseProblem as error:
        complain("serve", str(error))
        return 1
    token = token_from(os.environ)
    where = address_of(sock)
    host = args.address[0]
    if token.secret is not None and not is_loopback(host):
        log.warning(
            "review token over plain HTTP",
            address=where,
            advice="serve behind a TLS proxy, or on loopback",
        )
    route_uvicorn_logs()
    running = server(make_app(Serving(engine, store, token)))
    _stop_quietly(running)
    print(f"serving http://{where}/ (review {token.api})", flush=True)
    log.info("serving", address=where, review_api=token.api, artifacts=store.location)
    try:
        running.run(sockets=[sock])
    finally:
        engine.dispose()
    log.info("stopped serving", address=where)
    return 0
