"""The messages parent and child exchange, one frozen dataclass per type.

Who speaks when: the child says `Hello` once it is ready (its pid and whether the image engine
loads). The parent sends `Run`; the child answers `Accepted` *before* it starts, so a death after
that is the job's crash and a death before it is the host's fault. While it works the child
sends `Progress`; it ends with `Done`, `Failed` or (after the parent's `Cancel`) `Cancelled`,
or `Unable` when it ran out of threads, memory or disk: the host's trouble, not the job's.
`Stop` asks an idle child to exit (recycling). `Warm` tells an idle child that a Storybook build
is coming (another child plans it): it starts its browser and opens the build's page now rather
than at its first capture, and a job sent meanwhile is accepted and kept alive with progress as
usual. Anything else on the wire is a protocol error.
A `Failed` with `final` set is a failure no retry can mend (`ipc.failures.PermanentFailure`):
the parent fails the job at once instead of retrying it.
"""

from __future__ import annotations

import dataclasses
import signal
import types
import typing
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

#: Bumped whenever a message changes shape, or a result the parent checks does (3: `Failed`'s
#: `final`, a story's render time; 4: `Warm`); a child of another version is refused.
PROTOCOL_VERSION = 4
#: The signal a child answers by writing every thread's Python stack to its stderr (the host's
#: log): sent to a child about to be killed as hung, so that the log says where it was stuck.
STACK_DUMP_SIGNAL = signal.SIGUSR1


class ProtocolError(Exception):
    """The peer sent something that is not a valid frame or message: it cannot be trusted further."""


@dataclass(frozen=True)
class Hello:
    type: ClassVar[Literal["hello"]] = "hello"
    version: int
    pid: int
    #: The image engine's version ("libvips 8.18.7"), or "" when it failed to load.
    engine: str
    #: Why the image engine failed to load, when it did.
    engine_error: str | None = None


@dataclass(frozen=True)
class Run:
    type: ClassVar[Literal["run"]] = "run"
    job_id: int
    kind: str
    attempt: int
    payload: Any


@dataclass(frozen=True)
class Accepted:
    type: ClassVar[Literal["accepted"]] = "accepted"
    job_id: int


@dataclass(frozen=True)
class Progress:
    type: ClassVar[Literal["progress"]] = "progress"
    job_id: int
    detail: Any = None


@dataclass(frozen=True)
class Done:
    type: ClassVar[Literal["done"]] = "done"
    job_id: int
    result: Any


@dataclass(frozen=True)
class Failed:
    type: ClassVar[Literal["failed"]] = "failed"
    job_id: int
    error: str
    #: No retry can mend it: fail the job now, whatever attempts it has left.
    final: bool = False


@dataclass(frozen=True)
class Unable:
    """The child could not run the job for want of resources (a thread, memory, disk): the job
    goes back without spending an attempt, as when a child dies before accepting it."""

    type: ClassVar[Literal["unable"]] = "unable"
    job_id: int
    reason: str


@dataclass(frozen=True)
class Cancel:
    type: ClassVar[Literal["cancel"]] = "cancel"
    job_id: int


@dataclass(frozen=True)
class Cancelled:
    type: ClassVar[Literal["cancelled"]] = "cancelled"
    job_id: int


@dataclass(frozen=True)
class Stop:
    type: ClassVar[Literal["stop"]] = "stop"


@dataclass(frozen=True)
class Warm:
    """Start the browser while idle, and open `build`'s page: a Storybook build's captures
    follow its plan within seconds, and a browser takes one or two to launch, a page another."""

    type: ClassVar[Literal["warm"]] = "warm"
    #: The build's plan payload (`artifacts`, `build_id`, `storybook`), or None: the browser only.
    build: dict[str, Any] | None = None


ToChild = Run | Cancel | Stop | Warm
ToParent = Hello | Accepted | Progress | Done | Failed | Unable | Cancelled
Message = ToChild | ToParent

TO_CHILD: dict[str, type[Any]] = {cls.type: cls for cls in (Run, Cancel, Stop, Warm)}
TO_PARENT: dict[str, type[Any]] = {
    cls.type: cls for cls in (Hello, Accepted, Progress, Done, Failed, Unable, Cancelled)
}


def _fields(cls: type[Any]) -> dict[str, tuple[Any, bool]]:
    """Each field of a message class: its type hint and whether it must be sent."""
    hints = typing.get_type_hints(cls)
    return {
        field.name: (hints[field.name], field.default is dataclasses.MISSING)
        for field in dataclasses.fields(cls)
    }


#: Read once: resolving type hints costs more than decoding a frame, and every frame needs them.
_FIELDS = {cls: _fields(cls) for cls in (*TO_CHILD.values(), *TO_PARENT.values())}


def to_wire(message: Message) -> dict[str, Any]:
    """The message as a map for msgpack (fields as they are: `asdict` would deep-copy payloads)."""
    return {
        "type": message.type,
        **{name: getattr(message, name) for name in _FIELDS[type(message)]},
    }


def from_wire(obj: object, accepted: dict[str, type[Any]]) -> Any:
    """The message `obj` stands for, if it is one of `accepted` with fields of the right types."""
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        raise ProtocolError(f"expected a message map with a type, got {type(obj).__name__}")
    cls = accepted.get(obj["type"])
    if cls is None:
        raise ProtocolError(f"unexpected message type {obj['type']!r}")
    fields = _FIELDS[cls]
    values = {key: value for key, value in obj.items() if key != "type"}
    if unknown := values.keys() - fields.keys():
        raise ProtocolError(f"{obj['type']}: unknown fields {sorted(map(str, unknown))}")
    for name, (hint, required) in fields.items():
        if name not in values:
            if required:
                raise ProtocolError(f"{obj['type']}: missing field {name!r}")
            continue
        if not _matches(values[name], hint):
            raise ProtocolError(
                f"{obj['type']}: field {name!r} has type {type(values[name]).__name__}"
            )
    return cls(**values)


def _matches(value: object, hint: Any) -> bool:
    if hint is Any:
        return True
    if isinstance(hint, types.UnionType):
        return any(_matches(value, option) for option in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, typing.get_origin(hint) or hint)  # dict[str, Any]: a dict
