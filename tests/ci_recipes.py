"""README's "Use it in CI", read back as the jobs a runner would run.

PyYAML reads the jobs; what is left here is finding them in the section and checking, value by
value, that each is the shape the test takes, so that a README edit that changes the jobs'
shape fails the test that runs them, saying what changed, instead of running something other
than what the README shows. PyYAML reads YAML 1.1, where GitHub's `on:` is the key True;
nothing reads that key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

SECTION = "## Use it in CI"
#: The first line of each job's block: the file it is, as the README names it.
GITHUB_FILE = "# .github/workflows/storyshelf.yml"
GITLAB_FILE = "# .gitlab-ci.yml"


class UnreadableRecipe(AssertionError):
    """The README's CI section is not in the shape the test takes (a test failure)."""


@dataclass(frozen=True)
class Recipes:
    """The section's blocks: the two jobs, and the commands of the host run in the job."""

    github: dict[object, object]
    gitlab: dict[object, object]
    in_job: str


def read_recipes(readme: Path) -> Recipes:
    """The jobs of README's CI section: exactly two YAML blocks, each first naming its file,
    and one shell block (the variant's commands)."""
    text = readme.read_text()
    start = text.find(f"\n{SECTION}\n")
    if start < 0:
        raise UnreadableRecipe(f"{readme.name} has no {SECTION!r} section")
    end = text.find("\n## ", start + 1)
    blocks = re.findall(r"^```(\w+)\n(.*?)^```$", text[start:end], re.M | re.S)
    jobs = {body.split("\n", 1)[0]: body for kind, body in blocks if kind == "yaml"}
    shell = [body for kind, body in blocks if kind == "sh"]
    if sorted(jobs) != sorted([GITHUB_FILE, GITLAB_FILE]) or len(shell) != 1:
        raise UnreadableRecipe(
            f"{SECTION!r} should hold a yaml block for each of {GITHUB_FILE!r} and "
            f"{GITLAB_FILE!r} and one sh block; it holds yaml {sorted(jobs)} and "
            f"{len(shell)} sh"
        )
    return Recipes(
        github=mapping(_load(jobs[GITHUB_FILE], GITHUB_FILE), GITHUB_FILE),
        gitlab=mapping(_load(jobs[GITLAB_FILE], GITLAB_FILE), GITLAB_FILE),
        in_job=shell[0],
    )


def _load(source: str, where: str) -> object:
    """`source` read as YAML, a block that is not YAML failing with PyYAML's line and reason."""
    try:
        return yaml.safe_load(source)
    except yaml.YAMLError as error:
        raise UnreadableRecipe(f"{where}: not YAML: {error}") from error


def mapping(value: object, where: str) -> dict[object, object]:
    if not isinstance(value, dict):
        raise UnreadableRecipe(f"{where}: a mapping expected, not {value!r}")
    return value


def sequence(value: object, where: str) -> list[object]:
    if not isinstance(value, list):
        raise UnreadableRecipe(f"{where}: a list expected, not {value!r}")
    return value


def scalar(value: object, where: str) -> str:
    """A command or a variable's value: a string, as the runners pass them on. A shell line
    with `: ` in it reads as a mapping, and is refused here rather than run as something
    else."""
    if not isinstance(value, str):
        raise UnreadableRecipe(f"{where}: a string expected, not {value!r}")
    return value


def variables(value: object, where: str) -> dict[str, str]:
    """A job's `env:` or `variables:`: names to strings, as the job's shell receives them."""
    return {
        scalar(name, f"{where}: a name"): scalar(text, f"{where} {name}")
        for name, text in mapping(value, where).items()
    }
