"""A host's start: a fork server, then a first child that said hello, before anything else.

The fork server comes first, before any database connection or thread, so that none crosses a
fork. The first child's hello says whether children can work here at all (our protocol, an
image engine that computes); the artifact store is checked once the fork server runs. A host
whose children cannot work refuses to claim and leaves with `EXIT_NO_ENGINE`, one line on
stderr. Forks that fail meanwhile back off as they do later (`supervisor.host.children`), and a
stop signal while the host starts ends the start.
"""

from __future__ import annotations

import select
from collections.abc import Callable
from dataclasses import dataclass

from structlog.stdlib import BoundLogger

from ipc.artifacts.store import ArtifactStore, StoreError, StoreUnavailable
from ipc.forkserver import ForkRefused, ForkServerGone
from ipc.messages import PROTOCOL_VERSION, Hello
from supervisor.host.children import spawn_failed
from supervisor.host.exchange import version_mismatch
from supervisor.host.health import SpawnBackoff
from supervisor.host.pool import Child, Pool
from supervisor.host.signals import Signals
from supervisor.logs import complain

#: Exit status when the image engine cannot load: the host must not claim.
EXIT_NO_ENGINE = 3
#: How long to wait for the first child's hello before the host gives up on starting (later
#: children are hung when silent for `stall_seconds`, like a child on a job).
HELLO_TIMEOUT_SECONDS = 30.0


@dataclass
class FirstChild:
    """What it takes to get the first child of a starting host."""

    pool: Pool
    spawning: SpawnBackoff
    signals: Signals
    clock: Callable[[], float]
    log: BoundLogger

    def ready(self) -> Child | None:
        """The first child, once it said hello. One that stays silent (it may wait for a
        thread a pids limit refuses it) is killed and another tried after a back-off, as when
        forks fail; None when a stop signal arrived meanwhile."""
        while (child := self._spawned()) is not None:
            deadline = self.clock() + HELLO_TIMEOUT_SECONDS
            while child.hello is None and self.clock() < deadline and not child.closed:
                select.select([child.sock], [], [], 0.5)
                child.hello = next(
                    (m for m in self.pool.receive(child) if isinstance(m, Hello)), None
                )
            if child.hello is not None:
                return child
            self.pool.kill(child, "hung", f"no hello within {HELLO_TIMEOUT_SECONDS:g} s")
            self.pool.wait_all(5.0)
            delay = self.spawning.fork_failed()
            self.log.error(
                "host unhealthy: the first child did not say hello; trying another",
                backoff_seconds=round(delay, 2),
            )
            if self.signals.wait_for_stop(delay):
                return None
        return None

    def _spawned(self) -> Child | None:
        """The fork server and the first child; while forks fail, back off and try again.

        None when a stop signal arrived meanwhile. A fork server that cannot load the child
        code (`ForkServerError`) is not worth waiting for: it is raised.
        """
        while True:
            try:
                self.pool.ensure_fork_server()
                child = self.pool.spawn(self.clock())
            except (ForkServerGone, ForkRefused) as error:
                delay = spawn_failed(self.pool, self.spawning, error, self.log)
                if self.signals.wait_for_stop(delay):
                    return None
            else:
                self.spawning.forked()
                return child


def engine_problem(child: Child, log: BoundLogger) -> str | None:
    """Read the first child's hello: None when it speaks our protocol and computed with
    libvips, else why not."""
    hello = child.hello
    assert hello is not None, "FirstChild.ready() first"
    if hello.version != PROTOCOL_VERSION:
        return f"the children cannot work: {version_mismatch(hello)}"
    if hello.engine_error is not None:
        return f"the image engine cannot load: {hello.engine_error}"
    log.info("image engine loaded", engine=hello.engine, child_pid=child.pid)
    log.debug("child ready", child_pid=child.pid)
    return None


def store_problem(store: ArtifactStore, log: BoundLogger) -> str | None:
    """Why the artifact store cannot be used, or None. Checked once the fork server runs,
    so the parent's connection to a bucket never crosses a fork; a store that does not
    answer now may later, and only costs the jobs that need it a retry."""
    try:
        store.check()
    except StoreUnavailable as error:
        log.warning("the artifact store does not answer", error=str(error))
    except (StoreError, OSError) as error:
        return f"the artifact store cannot be used: {error}"
    return None


def refuse(why: str, log: BoundLogger) -> int:
    """A host whose children cannot work must not claim: say why and leave."""
    log.error("children cannot work; not claiming", error=why)
    complain("run", f"{why}")
    return EXIT_NO_ENGINE
