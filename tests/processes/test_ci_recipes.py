"""README's CI jobs, run as their runners would run them: each command in bash, in a job folder
of its own, with the CI's variables set, `storyshelf` on PATH and a real host doing the work.

What a runner brings is brought here instead: the Storybook build step copies a prebuilt static
Storybook (the demo's) into `storybook-static`, the install step is this checkout's `storyshelf`
on PATH, and the setup actions are this machine. Every other command is the README's own, word
for word; a step, a command or a shape the test does not know fails it, naming it, so that the
README cannot show a job the test does not run (PyYAML reads the jobs, `tests.ci_recipes` finds
them). The jobs that expect a capture machine get a
real `run` host beside them, on the GitHub job's PostgreSQL and the GitLab job's SQLite file
(the jobs only pass the URL on); the host in the job runs on the embedded default.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from supervisor.commands.demo import STORYBOOKS
from tests.chromium import require_chromium
from tests.ci_recipes import Recipes, mapping, read_recipes, scalar, sequence, variables
from tests.hosts import ROOT, StartHost
from tests.required import unavailable

#: The Storybook the jobs hand over, as `npx storybook build` would have left it.
STORYBOOK = STORYBOOKS / "main"
#: The README's Storybook build, which the test replaces by copying `STORYBOOK`.
BUILD_STORYBOOK = ["npm ci", "npx storybook build"]
#: The README's install, which `storyshelf` on PATH stands for.
INSTALL = "pip install storyshelf-capture"
#: The actions that set up GitHub's runner: this machine is set up already.
SETUP_ACTIONS = {"actions/checkout", "actions/setup-node", "actions/setup-python"}
#: How each runner runs a script: GitHub's `bash` when a step names no shell, GitLab's bash.
GITHUB_SHELL = ("bash", "-e")
GITLAB_SHELL = ("bash", "-e", "-o", "pipefail")
COMMIT = "0123456789abcdef0123456789abcdef01234567"
#: A job's time limit here, ample: the first host after an install compiles the diff's loops.
JOB_SECONDS = 240.0
#: The host beside a job: it polls often, since SQLite has no NOTIFY to wake it, and runs one
#: child, whose one browser does the demo's seven stories sooner than two starting theirs on a
#: shared machine (13 s a job against 20, measured).
HOST = ("--concurrency", "1", "--poll-seconds", "0.3")
#: What the runner's machine lends a job of this one's environment.
LENT = ("PATH", "HOME", "TMPDIR", "LANG", "STORYSHELF_CHROMIUM")


@pytest.fixture(autouse=True)
def tools_are_there() -> None:
    """The hosts render in Chromium, and GitHub's jobs read the id with jq (both are on
    GitHub's runners)."""
    require_chromium()
    if shutil.which("jq") is None:
        unavailable("jq", "no jq on PATH (apt-get install jq)")


@pytest.fixture
def recipes() -> Recipes:
    return read_recipes(ROOT / "README.md")


@dataclass(frozen=True)
class Finished:
    status: int
    stdout: str
    stderr: str


class Runner:
    """A CI runner's machine: the job's folder, and `storyshelf` (this checkout) and `python`
    on PATH as an install leaves them."""

    def __init__(self, folder: Path) -> None:
        self.workspace = folder / "workspace"
        self.workspace.mkdir()
        self.scripts = folder / "scripts"
        self.scripts.mkdir()
        tools = folder / "bin"
        tools.mkdir()
        python = shlex.quote(sys.executable)
        self._tool(
            tools / "storyshelf",
            f'PYTHONPATH={shlex.quote(str(ROOT))} exec {python} -m supervisor "$@"',
        )
        self._tool(tools / "python", f'exec {python} "$@"')
        lent = {name: os.environ[name] for name in LENT if name in os.environ}
        self.environment = lent | {"PATH": f"{tools}:{lent.get('PATH', '/usr/bin:/bin')}"}

    @staticmethod
    def _tool(path: Path, command: str) -> None:
        path.write_text(f"#!/bin/sh\n{command}\n")
        path.chmod(0o755)

    def build_storybook(self) -> None:
        shutil.copytree(STORYBOOK, self.workspace / "storybook-static")

    def run(self, script: str, shell: Sequence[str], variables: Mapping[str, str]) -> Finished:
        """`script` as the runner runs a step: a file, in `shell`, from the job's folder."""
        path = self.scripts / f"{len(list(self.scripts.iterdir()))}.sh"
        path.write_text(script)
        process = subprocess.Popen(
            [*shell, str(path)],
            cwd=self.workspace,
            env={**self.environment, **variables},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            stdout, stderr = process.communicate(timeout=JOB_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
            pytest.fail(f"the job ran past {JOB_SECONDS:g} s:\n{stdout}\n{stderr[-4000:]}")
        return Finished(process.returncode, stdout, stderr)


@pytest.fixture
def runner(tmp_path: Path) -> Runner:
    return Runner(tmp_path)


def secret_values(env: Mapping[str, str], secrets: Mapping[str, str]) -> dict[str, str]:
    """A GitHub job's `env:`, its `${{ secrets.NAME }}` given this test's `secrets`."""
    values = {}
    for name, text in env.items():
        wanted = re.fullmatch(r"\$\{\{ secrets\.(\w+) \}\}", text)
        if wanted is None and "${{" in text:
            pytest.fail(f"env {name}: the test gives secrets only, not {text!r}")
        if wanted is not None and wanted.group(1) not in secrets:
            pytest.fail(f"env {name}: the test has no secret {wanted.group(1)}")
        values[name] = secrets[wanted.group(1)] if wanted else text
    return values


def reported(finished: Finished, runner: Runner, host_log: str = "") -> int:
    """The job passed, and its output names the build, its branch and commit, and a report page
    that exists; the build's id."""
    assert finished.status == 0, (
        f"the job exited {finished.status}:\n{finished.stdout}\n{finished.stderr[-4000:]}"
        f"\n{host_log}"
    )
    heading = re.search(r"^build (\d+)  web @ (\S+) \((\w+)\)$", finished.stdout, re.M)
    assert heading is not None, finished.stdout
    assert heading.group(2, 3) == ("main", COMMIT)
    report = re.search(r"^report +(\S.*)$", finished.stdout, re.M)
    assert report is not None, finished.stdout
    page = runner.workspace / report.group(1)
    assert page.name == "index.html" and page.is_file(), report.group(1)
    return int(heading.group(1))


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_the_github_actions_job_passes_a_first_build_of_main_and_links_its_report(
    recipes: Recipes, runner: Runner, database_url: str, start_host: StartHost, tmp_path: Path
) -> None:
    jobs = mapping(recipes.github["jobs"], "jobs")
    assert len(jobs) == 1, f"one job expected, not {sorted(jobs)}"
    job = mapping(next(iter(jobs.values())), "the job")
    secrets = {
        "STORYSHELF_DATABASE_URL": database_url,
        "STORYSHELF_ARTIFACTS": str(tmp_path / "artifacts"),
        "AWS_ACCESS_KEY_ID": "unused by a folder",
        "AWS_SECRET_ACCESS_KEY": "unused by a folder",
    }
    summary = tmp_path / "summary.md"
    job_variables = secret_values(variables(job["env"], "env"), secrets) | {
        "CI": "true",
        "GITHUB_HEAD_REF": "",  # a push, not a pull request
        "GITHUB_REF_NAME": "main",
        "GITHUB_SHA": COMMIT,
        "GITHUB_STEP_SUMMARY": str(summary),
    }
    commands = []
    for number, entry in enumerate(sequence(job["steps"], "steps")):
        step = mapping(entry, f"step {number}")
        if not set(step) <= {"name", "uses", "with", "run"} or ("uses" in step) == ("run" in step):
            pytest.fail(
                f"step {number} is not a setup action or a command: {sorted(map(str, step))}"
            )
        if "uses" in step:
            action = scalar(step["uses"], f"step {number}").split("@")[0]
            assert action in SETUP_ACTIONS, f"the test cannot stand in for {action}"
        else:
            commands.append(scalar(step["run"], f"step {number}"))
    assert commands[:2] == [" && ".join(BUILD_STORYBOOK), INSTALL] and len(commands) == 3, (
        f"the steps' commands should be the Storybook build, the install and the review: {commands}"
    )
    host = start_host(*HOST)
    runner.build_storybook()
    finished = runner.run(commands[2], GITHUB_SHELL, job_variables)
    build_id = reported(finished, runner, host.log_tail())
    assert f"/builds/{build_id}/report" in summary.read_text()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_the_gitlab_job_passes_a_first_build_of_main_and_names_its_report(
    recipes: Recipes, runner: Runner, database_url: str, start_host: StartHost, tmp_path: Path
) -> None:
    stages = sequence(recipes.gitlab["stages"], "stages")
    jobs = {
        name: mapping(job, f"job {name}")
        for name, job in recipes.gitlab.items()
        if name != "stages"
    }
    assert len(jobs) == 2 and sorted(scalar(j["stage"], "stage") for j in jobs.values()) == sorted(
        stages
    ), f"a Storybook job and a review job expected, one per stage: {sorted(jobs)}"
    storybook, review = sorted(jobs, key=lambda name: stages.index(jobs[name]["stage"]))
    assert sequence(jobs[storybook]["script"], "script") == BUILD_STORYBOOK
    paths = sequence(mapping(jobs[storybook]["artifacts"], "artifacts")["paths"], "paths")
    assert paths == ["storybook-static/"]
    assert sequence(jobs[review]["needs"], "needs") == [storybook]
    assert sequence(jobs[review]["before_script"], "before_script") == [INSTALL]
    script = [scalar(line, "script") for line in sequence(jobs[review]["script"], "script")]
    job_variables = variables(jobs[review]["variables"], "variables") | {
        # the project's CI/CD variables
        "STORYSHELF_DATABASE_URL": database_url,
        "STORYSHELF_ARTIFACTS": str(tmp_path / "artifacts"),
        # the runner's
        "CI": "true",
        "CI_COMMIT_REF_NAME": "main",
        "CI_COMMIT_SHA": COMMIT,
    }
    host = start_host(*HOST)
    runner.build_storybook()
    finished = runner.run("\n".join(script) + "\n", GITLAB_SHELL, job_variables)
    build_id = reported(finished, runner, host.log_tail())
    assert re.search(
        rf"^Storyshelf report https://\S+/builds/{build_id}/report$", finished.stdout, re.M
    )


def test_the_host_in_the_job_captures_on_the_embedded_default_and_leaves_its_report_there(
    recipes: Recipes, runner: Runner
) -> None:
    runner.build_storybook()
    finished = runner.run(
        recipes.in_job,
        GITHUB_SHELL,
        {"CI": "true", "GITHUB_HEAD_REF": "", "GITHUB_REF_NAME": "main", "GITHUB_SHA": COMMIT},
    )
    build_id = reported(finished, runner)
    folder = runner.workspace / ".storyshelf" / "artifacts" / "reports" / "web" / str(build_id)
    assert (folder / "index.html").is_file()
