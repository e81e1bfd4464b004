"""What `run` checks before it claims, and the lines between parent and child code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import structlog

from ipc import scratch as ipc_scratch
from ipc.artifacts.location import CACHE_DIR_VARIABLE
from ipc.messages import PROTOCOL_VERSION
from supervisor.db.connection import connect
from supervisor.db.migrate import upgrade
from supervisor.host import scratch
from tests.hosts import ROOT, enqueue

BROKEN_IMPORT = 'raise ImportError("libvips.so.42: cannot open shared object file")\n'
BROKEN_OPERATIONS = textwrap.dedent(
    """
    class Error(Exception):
        pass

    class Image:
        @staticmethod
        def black(width, height):
            raise Error('VipsOperation: class "black" not found')

    def concurrency_set(threads):
        pass

    def cache_set_max(operations):
        pass

    def version(flag):
        return 0
    """
)


def run_python(
    code: str, *, extra_path: Path | None = None, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(str(part) for part in (extra_path, ROOT) if part)
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True, text=True, cwd=cwd, timeout=120, env={**os.environ, "PYTHONPATH": path},
    )  # fmt: skip


def test_the_parent_never_imports_pyvips(tmp_path: Path) -> None:
    code = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        import supervisor.commands.main, supervisor.commands.demo, supervisor.builds.capture, supervisor.builds.publish
        from supervisor.host.settings import HostSettings
        from supervisor.host.loop import Host
        host = Host(HostSettings(database_url="sqlite:///{tmp_path}/db.sqlite", artifacts="{tmp_path}", concurrency=1))
        assert host.start() == 0
        host.shutdown()
        print(sorted(name for name in sys.modules if name.split(".")[0] in ("pyvips", "child")))
        """
    )
    upgrade(connect(f"sqlite:///{tmp_path}/db.sqlite"))
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_child_code_imports_no_database_code() -> None:
    code = (
        "import sys, child.worker.loop, child.capture.shard, child.diff.compare, child.worker.forkserver, child.worker.handlers\n"
        "print(sorted(n for n in sys.modules if n.split('.')[0] in ('sqlalchemy', 'psycopg', 'supervisor', 'alembic')))"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("fake", "reason"),
    [
        (BROKEN_IMPORT, "ImportError: libvips.so.42: cannot open shared object file"),
        (BROKEN_OPERATIONS, 'class "black" not found'),
    ],
)
def test_host_refuses_to_claim_when_the_image_engine_cannot_load(
    tmp_path: Path, fake: str, reason: str
) -> None:
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "pyvips.py").write_text(fake)
    url = f"sqlite:///{tmp_path}/db.sqlite"
    upgrade(connect(url))
    result = subprocess.run(
        [sys.executable, "-m", "supervisor", "run", "--database-url", url, "--artifacts", str(tmp_path / "a")],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": f"{tmp_path / 'fake'}{os.pathsep}{ROOT}"},
    )  # fmt: skip
    assert result.returncode == 3
    assert "the image engine cannot load" in result.stderr and reason in result.stderr


def test_scratch_of_dead_children_is_swept_at_start(tmp_path: Path) -> None:
    folder = ipc_scratch.folder(tmp_path)
    folder.mkdir(parents=True)
    dead = subprocess.run(["true"], check=True)  # a pid that has exited
    assert dead.returncode == 0
    gone = folder / "999999-diff.png.tmp"
    unowned = folder / "leftover.tmp"
    alive = folder / f"{os.getpid()}-diff.png.tmp"
    for path in (gone, unowned, alive):
        path.write_bytes(b"x")
    assert scratch.sweep([tmp_path], structlog.get_logger()) == 2
    assert [path.name for path in folder.iterdir()] == [alive.name]


def test_a_fork_server_forked_ahead_gives_its_children_the_started_hosts_settings(
    tmp_path: Path,
) -> None:
    """`python -m supervisor run` forks the fork server before the host has chosen its cache
    folder (and exported it) or configured its logs: its children still read the folder the host
    chose and log as the host does (JSON at its level, their pid bound)."""
    url = f"sqlite:///{tmp_path}/db.sqlite"
    engine = connect(url)
    upgrade(engine)
    job_id = enqueue(engine, "environment", {"name": CACHE_DIR_VARIABLE})
    log = tmp_path / "host.log"
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "STORYSHELF_PLUGINS": "tests.kinds"}
    environment.pop(CACHE_DIR_VARIABLE, None)
    with log.open("w") as output:
        code = subprocess.run(
            [
                sys.executable, "-m", "supervisor", "run", "--drain", "--log-level", "debug",
                "--database-url", url, "--artifacts", str(tmp_path / "a"),
                "--cache-dir", str(tmp_path / "cache"),
            ],
            stdout=output, stderr=subprocess.STDOUT, timeout=120, env=environment,
        ).returncode  # fmt: skip
    assert code == 0, log.read_text()
    events = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    (read,) = [event for event in events if event["event"] == "environment read"]
    assert read["value"] == str(tmp_path / "cache") and read["job_id"] == job_id
    assert read["child_pid"] != os.getpid()
    assert any(event["level"] == "debug" and "child_pid" in event for event in events)


def test_the_fork_server_has_no_thread_but_its_own() -> None:
    code = textwrap.dedent(
        """
        import os
        from supervisor.host.forkserver import ForkServer
        server = ForkServer.start()
        print(len(os.listdir(f"/proc/{server.pid}/task")))
        server.stop()
        """
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "1"


def test_a_child_of_another_protocol_version_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/db.sqlite"
    upgrade(connect(url))
    result = subprocess.run(
        [sys.executable, "-m", "supervisor", "run", "--database-url", url, "--artifacts", str(tmp_path / "a")],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT), "STORYSHELF_PLUGINS": "tests.other_version"},
    )  # fmt: skip
    assert result.returncode == 3
    expected = (
        f"the child speaks protocol version {PROTOCOL_VERSION + 1}, this host {PROTOCOL_VERSION}"
    )
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


def test_the_first_start_says_it_compiles_the_diffs_loops_and_a_later_one_does_not(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/db.sqlite"
    upgrade(connect(url))
    # An empty cache folder stands for a new install; the demo's host runs at this level.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    command = [
        sys.executable, "-m", "supervisor", "run", "--drain", "--database-url", url,
        "--artifacts", str(tmp_path / "a"), "--log-level", "warning",
    ]  # fmt: skip
    first, later = (
        subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
        for _ in range(2)
    )
    compiling = "compiling the diff's loops once (about 20 s); later starts reuse them"
    assert first.returncode == 0, first.stderr
    # Once, not once a function; a fork server given up on under a heavy load (past its 90 s)
    # leaves part of the loops uncompiled, and the next one says it again as it compiles them.
    given_up = first.stderr.count("the fork server did not start in time")
    assert first.stderr.count(compiling) == 1 + given_up, first.stderr
    assert later.returncode == 0, later.stderr
    assert compiling not in later.stderr
