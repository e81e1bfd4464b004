"""Latency between the hosts and the services: a TCP forwarder that delays every chunk.

This kernel has no `netem` qdisc, the usual way to add delay; the qdiscs it has (`tbf`, `htb`,
`pfifo`) shape a rate and delay a packet only while a queue is full, which a database's small
round trips never fill. So the services' namespace runs this forwarder: each host reaches
PostgreSQL and the bucket through it, and every chunk read from either side is written to the
other `--delay-ms` later. Chunks keep their order and do not wait for one another (each is
stamped when read and written when due), so a round trip costs twice the delay and a large
transfer is not slowed beyond it: what a link between two machines a few switches apart adds.

A host cut off (`scripts.partitions.namespaces`) leaves its connections here open and silent,
as a real peer would: keepalives and a user timeout end them only when the host stays away
far longer than any cut, so a killed host's connections do not pile up.

`python -m scripts.partitions.latency --delay-ms 2 LISTEN_PORT=TARGET_HOST:PORT ...`; it exits
when its parent (the soak) does.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import struct
import sys

#: How much of a stream is read at once.
CHUNK_BYTES = 64 * 1024
#: How many chunks may wait for their moment before reading stops: a peer that does not read
#: (a host cut off) holds the sender back instead of filling the forwarder's memory.
QUEUED_CHUNKS = 64
#: A connection whose peer has not acknowledged anything for this long is given up (the
#: longest cut is 90 s), and keepalives probe an idle one after a minute.
USER_TIMEOUT_MS = 300_000
KEEPALIVE_IDLE_SECONDS, KEEPALIVE_INTERVAL_SECONDS, KEEPALIVE_COUNT = 60, 20, 9
#: How often the forwarder looks whether its parent is still there.
PARENT_CHECK_SECONDS = 1.0


def hold_on(sock: socket.socket) -> None:
    """Give up a silent peer only long after any cut ends (see the module's docstring)."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, KEEPALIVE_IDLE_SECONDS)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, KEEPALIVE_INTERVAL_SECONDS)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, KEEPALIVE_COUNT)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, USER_TIMEOUT_MS)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with a reset, not an end: no linger, so the kernel sends RST."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    """Copy `reader` to `writer`, each chunk `delay` s after it was read, in order; an end
    (`b""`) is passed on as an end, a reset (`None`) as a reset."""
    loop = asyncio.get_running_loop()
    due: asyncio.Queue[tuple[float, bytes | None]] = asyncio.Queue(QUEUED_CHUNKS)

    async def read() -> None:
        try:
            while chunk := await reader.read(CHUNK_BYTES):
                await due.put((loop.time() + delay, chunk))
        except OSError:
            # A database that exits with a statement unread (a restart while a COMMIT was on
            # its way) resets the connection. Passed on as an end, or not at all, it left the
            # host waiting for an answer forever on a connection this forwarder kept alive.
            await due.put((loop.time() + delay, None))
            return
        await due.put((loop.time() + delay, b""))

    reading = asyncio.create_task(read())
    try:
        while True:
            at, chunk = await due.get()
            await asyncio.sleep(max(0.0, at - loop.time()))
            if chunk is None:
                reset(writer)
                return
            if not chunk:
                if writer.can_write_eof():
                    writer.write_eof()
                return
            writer.write(chunk)
            await writer.drain()
    finally:
        reading.cancel()


async def forward(
    client_reader: asyncio.StreamReader,
    client_writer: asyncio.StreamWriter,
    target: tuple[str, int],
    delay: float,
) -> None:
    """One connection: open the target, then pump both ways until either side ends; a target
    that refuses (a restarting database) resets the client, as the target itself would."""
    sock = client_writer.get_extra_info("socket")
    if sock is not None:
        hold_on(sock)
    try:
        server_reader, server_writer = await asyncio.open_connection(*target)
    except OSError:
        client_writer.transport.abort()
        return
    try:
        await asyncio.gather(
            pump(client_reader, server_writer, delay), pump(server_reader, client_writer, delay)
        )
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        for writer in (client_writer, server_writer):
            writer.transport.abort()


async def serve(routes: dict[int, tuple[str, int]], delay: float) -> None:
    """Listen on every route's port (all addresses of the services' namespace) until the
    parent is gone."""
    parent = os.getppid()
    servers = []
    # Python 3.11's streams hold a connection's task and reader only weakly: a connection idle
    # both ways (a host's pooled database connection) would be collected, its socket left
    # open and unread, and the host's next statement would wait forever. Held here until done.
    connections: set[asyncio.Task[None]] = set()
    for port, target in routes.items():

        async def handle(
            reader: asyncio.StreamReader,
            writer: asyncio.StreamWriter,
            target: tuple[str, int] = target,
        ) -> None:
            task = asyncio.current_task()
            assert task is not None
            connections.add(task)
            try:
                await forward(reader, writer, target, delay)
            finally:
                connections.discard(task)

        servers.append(await asyncio.start_server(handle, "0.0.0.0", port, reuse_address=True))
    print("forwarding", flush=True)  # the soak waits for this line
    while os.getppid() == parent:
        await asyncio.sleep(PARENT_CHECK_SECONDS)
    for server in servers:
        server.close()


def route(text: str) -> tuple[int, tuple[str, int]]:
    """`LISTEN_PORT=HOST:PORT`."""
    try:
        listen, target = text.split("=", 1)
        host, port = target.rsplit(":", 1)
        return int(listen), (host, int(port))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not LISTEN_PORT=HOST:PORT") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.partitions.latency")
    parser.add_argument("--delay-ms", type=float, required=True, help="added to each direction")
    parser.add_argument("routes", type=route, nargs="+", metavar="LISTEN_PORT=HOST:PORT")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(dict(args.routes), args.delay_ms / 1000))
    return 0


if __name__ == "__main__":
    sys.exit(main())
