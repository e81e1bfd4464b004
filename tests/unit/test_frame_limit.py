"""`ipc.framing` refuses to encode what the peer would refuse to read, and says how big it was."""

from __future__ import annotations

import pytest

from ipc.framing import MAX_FRAME_BYTES, FrameTooLarge, encode
from ipc.messages import Done, ProtocolError


def test_a_message_over_the_limit_is_refused_with_its_size() -> None:
    with pytest.raises(FrameTooLarge) as refused:
        encode(Done(1, b"\0" * MAX_FRAME_BYTES))
    assert refused.value.message_type == "done"
    assert MAX_FRAME_BYTES < refused.value.size < MAX_FRAME_BYTES + 64
    assert isinstance(refused.value, ProtocolError)
