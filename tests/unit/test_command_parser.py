"""The command line loads only the command it runs: `status` does not import the host, the
server or the demo, whose imports were a third of every call's start-up."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from supervisor.commands.main import COMMANDS, build_parser
from tests.hosts import ROOT

LOADED = (
    "import sys; from supervisor.commands.main import build_parser; build_parser('status');"
    "print(*sorted(name for name in sys.modules if name.startswith('supervisor.')))"
)


def test_a_call_imports_its_own_command_only() -> None:
    result = subprocess.run(
        [sys.executable, "-c", LOADED],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = set(result.stdout.split())
    commands = {name for name in loaded if name.startswith("supervisor.commands.")}
    assert commands == {
        "supervisor.commands.main",
        "supervisor.commands.options",
        "supervisor.commands.status",
    }
    assert not {"supervisor.host.loop", "supervisor.serve.app"} & loaded


#: What each command cannot be parsed without.
REQUIRED = {
    "build": ["1"],
    "cancel": ["1"],
    "project": ["web"],
    "review": ["1", "--accept", "--by", "me"],
    "enqueue-build": ["--project", "web", "--branch", "main", "--images", "shots"],
}


@pytest.mark.parametrize("name", COMMANDS)
def test_each_command_has_its_options_and_its_handler(name: str) -> None:
    args = build_parser(name).parse_args([name, *REQUIRED.get(name, [])])
    assert callable(args.handler)
    assert args.command == name
