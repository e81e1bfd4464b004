"""Framing of messages over a stream socket: a 4-byte big-endian length, then a msgpack map.

The length comes first so that a reader knows how much to wait for and can refuse an oversized
frame before buffering it. Anything that does not decode to a known message is a `ProtocolError`:
the parent then kills that child (a crash) rather than guess; it never hangs on a garbled peer.
The parent reads without blocking (`FrameReader.feed`); the child blocks (`recv_message`).
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from typing import Any

import msgpack

from ipc.messages import Message, ProtocolError, from_wire, to_wire

HEADER = struct.Struct(">I")
#: The largest frame either side accepts; uploads size shards so that their messages fit
#: (`supervisor.builds.uploads.MAX_SNAPSHOTS_PER_SHARD`).
MAX_FRAME_BYTES = 16 * 2**20


class FrameTooLarge(ProtocolError):
    """A message to send that encodes to more than `MAX_FRAME_BYTES`; nothing of it was sent.

    The peer would refuse the frame and count the sender broken, so the sender, which knows
    the job, sends something that fits instead (the child: a `Failed` naming the size). It is
    a `ProtocolError`, so a caller that only knows those still stops at it.
    """

    def __init__(self, message_type: str, size: int) -> None:
        super().__init__(f"{message_type} message of {size} bytes exceeds {MAX_FRAME_BYTES}")
        self.message_type = message_type
        self.size = size


def encode(message: Message) -> bytes:
    """The frame of `message`; `FrameTooLarge` when it would exceed `MAX_FRAME_BYTES`."""
    body: bytes = msgpack.packb(to_wire(message), use_bin_type=True)
    if len(body) > MAX_FRAME_BYTES:
        raise FrameTooLarge(message.type, len(body))
    return HEADER.pack(len(body)) + body


def decode_body(body: bytes, accepted: dict[str, type[Any]]) -> Any:
    try:
        obj = msgpack.unpackb(body, raw=False, strict_map_key=True, use_list=True)
    except Exception as error:  # msgpack raises several unrelated types on garbage
        raise ProtocolError(f"undecodable frame: {error or type(error).__name__}") from error
    return from_wire(obj, accepted)


def _length(header: bytes) -> int:
    (length,) = HEADER.unpack(header)
    if length > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {length} bytes exceeds the limit of {MAX_FRAME_BYTES}")
    return int(length)


class FrameReader:
    """Collects bytes as they arrive and returns the whole messages among them."""

    def __init__(self, accepted: dict[str, type[Any]]) -> None:
        self._accepted = accepted
        self._buffer = bytearray()

    def feed(self, data: bytes) -> Iterator[Any]:
        """The messages completed by `data`, in order; a bad frame raises after the good ones."""
        self._buffer += data
        while len(self._buffer) >= HEADER.size:
            length = _length(bytes(self._buffer[: HEADER.size]))
            end = HEADER.size + length
            if len(self._buffer) < end:
                return
            body = bytes(self._buffer[HEADER.size : end])
            del self._buffer[:end]
            yield decode_body(body, self._accepted)

    @property
    def pending(self) -> int:
        """Bytes of a frame not yet complete (a peer that dies mid-frame leaves some)."""
        return len(self._buffer)


def send_message(sock: socket.socket, message: Message) -> None:
    sock.sendall(encode(message))


def _recv_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            if chunks:
                raise ProtocolError(
                    f"connection closed mid-frame after {len(chunks)} of {size} bytes"
                )
            return None
        chunks += chunk
    return bytes(chunks)


def recv_message(sock: socket.socket, accepted: dict[str, type[Any]]) -> Any | None:
    """The next message, blocking; None when the peer closed the connection between frames."""
    header = _recv_exactly(sock, HEADER.size)
    if header is None:
        return None
    body = _recv_exactly(sock, _length(header))
    if body is None:
        raise ProtocolError("connection closed after a frame header")
    return decode_body(body, accepted)
