"""The wire format: round trips, and garbage that is refused, never crashes, never hangs."""

from __future__ import annotations

import contextlib
import socket
import struct

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ipc.forkserver import MAX_SETTINGS_BYTES, SETTINGS_LENGTH, recv_settings, send_settings
from ipc.framing import MAX_FRAME_BYTES, FrameReader, encode, recv_message, send_message
from ipc.logs import LogSettings
from ipc.messages import (
    TO_CHILD,
    TO_PARENT,
    Accepted,
    Done,
    Failed,
    Hello,
    Progress,
    ProtocolError,
    Run,
    Stop,
    Warm,
)


def frame(obj: object) -> bytes:
    body = msgpack.packb(obj)
    return struct.pack(">I", len(body)) + body


def test_messages_round_trip_through_a_socket() -> None:
    parent, child = socket.socketpair()
    run = Run(job_id=7, kind="capture", attempt=2, payload={"snapshots": [{"name": "a"}]})
    send_message(parent, run)
    assert recv_message(child, TO_CHILD) == run
    sent = [
        Hello(1, 99, "libvips 8.18"),
        Accepted(7),
        Progress(7, {"done": 1}),
        Done(7, {"x": [1]}),
        Failed(7, "webhook answered 404 Not Found", final=True),
    ]
    for message in sent:
        send_message(child, message)
    reader = FrameReader(TO_PARENT)
    received: list[object] = []
    while len(received) < len(sent):
        received += reader.feed(parent.recv(65536))
    assert received == sent


def test_a_failure_says_whether_a_retry_could_mend_it_and_is_retryable_unless_told() -> None:
    reader = FrameReader(TO_PARENT)
    assert list(reader.feed(frame({"type": "failed", "job_id": 1, "error": "x"}))) == [
        Failed(1, "x")
    ]
    assert Failed(1, "x").final is False
    with pytest.raises(ProtocolError, match="field 'final' has type str"):
        list(
            FrameReader(TO_PARENT).feed(
                frame({"type": "failed", "job_id": 1, "error": "x", "final": "yes"})
            )
        )


def test_a_warm_names_the_coming_build_or_nothing_and_nothing_else() -> None:
    reader = FrameReader(TO_CHILD)
    build = {
        "artifacts": "/srv/artifacts",
        "build_id": 3,
        "storybook": {"manifest": "m", "sha256": "s"},
    }
    assert list(reader.feed(encode(Warm(build)) + encode(Warm()))) == [Warm(build), Warm(None)]
    with pytest.raises(ProtocolError, match="field 'build' has type str"):
        list(FrameReader(TO_CHILD).feed(frame({"type": "warm", "build": "3"})))


def test_reader_reassembles_frames_split_at_every_byte() -> None:
    data = encode(Failed(3, "boom")) + encode(Accepted(4))
    reader = FrameReader(TO_PARENT)
    received = [message for byte in data for message in reader.feed(bytes([byte]))]
    assert received == [Failed(3, "boom"), Accepted(4)]
    assert reader.pending == 0


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (struct.pack(">I", MAX_FRAME_BYTES + 1), "exceeds the limit"),
        (struct.pack(">I", 3) + b"\xc1\xc1\xc1", "undecodable"),
        (frame([1, 2, 3]), "expected a message map"),
        (frame({"type": "launch"}), "unexpected message type"),
        (frame({"type": "failed", "job_id": 1}), "missing field"),
        (frame({"type": "accepted", "job_id": "1"}), "has type str"),
        (frame({"type": "accepted", "job_id": True}), "has type bool"),
        (frame({"type": "accepted", "job_id": 1, "extra": 0}), "unknown fields"),
        (
            frame({"type": "run", "job_id": 1, "kind": "x", "attempt": 1, "payload": None}),
            "unexpected",
        ),
    ],
)
def test_garbled_frames_are_protocol_errors(data: bytes, reason: str) -> None:
    with pytest.raises(ProtocolError, match=reason):
        list(FrameReader(TO_PARENT).feed(data))


def test_oversized_frame_is_refused_from_its_header_alone() -> None:
    reader = FrameReader(TO_PARENT)
    with pytest.raises(ProtocolError, match="exceeds"):
        list(reader.feed(struct.pack(">I", 2**31)))


def test_a_peer_closing_mid_frame_is_a_protocol_error_not_a_hang() -> None:
    parent, child = socket.socketpair()
    parent.sendall(encode(Stop())[:3])
    parent.close()
    with pytest.raises(ProtocolError, match="closed mid-frame"):
        recv_message(child, TO_CHILD)


def test_oversized_message_is_refused_by_the_sender() -> None:
    with pytest.raises(ProtocolError, match="exceeds"):
        encode(Done(1, "x" * (MAX_FRAME_BYTES + 1)))


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=512), st.integers(min_value=1, max_value=64))
def test_decoder_fed_arbitrary_bytes_yields_messages_or_a_protocol_error(
    data: bytes, chunk: int
) -> None:
    reader = FrameReader(TO_PARENT)
    try:
        for start in range(0, len(data), chunk):
            for message in reader.feed(data[start : start + chunk]):
                assert type(message) in TO_PARENT.values()
    except ProtocolError:
        pass


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(
            ["type", "job_id", "error", "result", "detail", "pid", "engine", "version"]
        ),
        st.one_of(
            st.integers(min_value=-(2**63), max_value=2**64 - 1),
            st.text(max_size=8),
            st.none(),
            st.binary(max_size=4),
            st.booleans(),
        ),
    )
)
def test_decoder_fed_arbitrary_maps_never_fails_otherwise(obj: dict[str, object]) -> None:
    """Any other exception than `ProtocolError` fails the test; what decodes is a known type."""
    with contextlib.suppress(ProtocolError):
        for message in FrameReader(TO_PARENT).feed(frame(obj)):
            assert type(message) in TO_PARENT.values()


def test_messages_before_a_bad_frame_are_delivered_before_the_error() -> None:
    delivered = []
    with pytest.raises(ProtocolError):
        for message in FrameReader(TO_PARENT).feed(encode(Accepted(9)) + b"\x00\x00\x00\x01\xc1"):
            delivered.append(message)
    assert delivered == [Accepted(9)]


def test_fork_server_settings_go_across_and_garbled_ones_read_as_none() -> None:
    """A fork server forked ahead reads the parent's settings first; what is not settings (a
    length past the cap, text that is not JSON, a level the host has no name for, a socket
    closed half-way) reads as None, and the server exits rather than guess."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        send_settings(ours, {"STORYSHELF_CACHE_DIR": "/var/cache/s"}, LogSettings("debug", True))
        assert recv_settings(theirs) == {
            "environment": {"STORYSHELF_CACHE_DIR": "/var/cache/s"},
            "log_level": "debug",
            "json_logs": True,
        }
        send_settings(ours, {}, None)
        assert recv_settings(theirs) == {"environment": {}, "log_level": "info", "json_logs": None}
    bad_bodies = [
        b"not json",
        b'{"environment": {}, "log_level": "loud", "json_logs": null}',
        b'{"environment": [], "log_level": "info", "json_logs": null}',
        b'{"log_level": "info", "json_logs": null}',
    ]
    for body in bad_bodies:
        ours, theirs = socket.socketpair()
        with ours, theirs:
            ours.sendall(SETTINGS_LENGTH.pack(len(body)) + body)
            assert recv_settings(theirs) is None, body
    for frame in (SETTINGS_LENGTH.pack(MAX_SETTINGS_BYTES + 1), SETTINGS_LENGTH.pack(10) + b"{}"):
        ours, theirs = socket.socketpair()
        with theirs:
            ours.sendall(frame)
            ours.close()
            assert recv_settings(theirs) is None
