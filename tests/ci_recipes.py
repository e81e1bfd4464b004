"""README's "Use it in CI", read back as the jobs a runner would run.

The jobs are YAML, and PyYAML is not a dependency of the suite; they use a small part of it
(block mappings and sequences, `|` blocks, plain, quoted and `[a, b]` scalars, comments), so
this reader takes that part and refuses anything else with the line it stopped at. A README
edit that changes the jobs' shape then fails the test that runs them, saying where, instead of
running something other than what the README shows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

#: A value read: a scalar (always a string, as the runners' own `env:` values are), a mapping
#: or a list.
Value = str | dict[str, "Value"] | list["Value"] | None

SECTION = "## Use it in CI"
#: The first line of each job's block: the file it is, as the README names it.
GITHUB_FILE = "# .github/workflows/storyshelf.yml"
GITLAB_FILE = "# .gitlab-ci.yml"

KEY = re.compile(r"([A-Za-z0-9_.-]+):(?: (.*))?$")


class UnreadableRecipe(AssertionError):
    """The README's CI section is not in the shape this reader takes (a test failure)."""


@dataclass(frozen=True)
class Recipes:
    """The section's blocks: the two jobs, and the commands of the host run in the job."""

    github: dict[str, Value]
    gitlab: dict[str, Value]
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
    yaml = {body.split("\n", 1)[0]: body for kind, body in blocks if kind == "yaml"}
    shell = [body for kind, body in blocks if kind == "sh"]
    if sorted(yaml) != sorted([GITHUB_FILE, GITLAB_FILE]) or len(shell) != 1:
        raise UnreadableRecipe(
            f"{SECTION!r} should hold a yaml block for each of {GITHUB_FILE!r} and "
            f"{GITLAB_FILE!r} and one sh block; it holds yaml {sorted(yaml)} and "
            f"{len(shell)} sh"
        )
    return Recipes(
        github=mapping(read_yaml(yaml[GITHUB_FILE]), GITHUB_FILE),
        gitlab=mapping(read_yaml(yaml[GITLAB_FILE]), GITLAB_FILE),
        in_job=shell[0],
    )


def mapping(value: Value, where: str) -> dict[str, Value]:
    if not isinstance(value, dict):
        raise UnreadableRecipe(f"{where}: a mapping expected, not {value!r}")
    return value


def sequence(value: Value, where: str) -> list[Value]:
    if not isinstance(value, list):
        raise UnreadableRecipe(f"{where}: a list expected, not {value!r}")
    return value


def scalar(value: Value, where: str) -> str:
    if not isinstance(value, str):
        raise UnreadableRecipe(f"{where}: a string expected, not {value!r}")
    return value


@dataclass(frozen=True)
class Line:
    number: int
    indent: int
    text: str  # without the indent
    raw: str


def read_yaml(source: str) -> Value:
    """`source` as the part of YAML the README's jobs use (see the module)."""
    lines = [
        Line(number, len(raw) - len(raw.lstrip(" ")), raw.strip(), raw)
        for number, raw in enumerate(source.splitlines(), 1)
    ]
    reader = _Reader(lines)
    value = reader.block(0)
    if reader.peek() is not None:
        reader.refuse("content after the document")
    return value


class _Reader:
    """A cursor over the lines; comments and blank lines are skipped except inside `|`."""

    def __init__(self, lines: list[Line]) -> None:
        self.lines = lines
        self.at = 0

    def peek(self) -> Line | None:
        while self.at < len(self.lines):
            line = self.lines[self.at]
            if line.text and not line.text.startswith("#"):
                return line
            self.at += 1
        return None

    def refuse(self, why: str) -> NoReturn:
        line = self.lines[min(self.at, len(self.lines) - 1)]
        raise UnreadableRecipe(f"line {line.number} ({line.raw.strip()!r}): {why}")

    def block(self, indent: int) -> Value:
        line = self.peek()
        if line is None or line.indent != indent:
            self.refuse(f"a block indented {indent} expected")
        return self.items(indent) if line.text.startswith("- ") else self.pairs(indent)

    def pairs(self, indent: int) -> dict[str, Value]:
        found: dict[str, Value] = {}
        while (line := self.peek()) is not None and line.indent == indent:
            match = KEY.match(line.text)
            if match is None or line.text.startswith("- "):
                self.refuse("a `key: value` expected")
            key, rest = match.group(1), match.group(2)
            if key in found:
                self.refuse(f"{key} given twice")
            self.at += 1
            found[key] = self.value(rest, indent)
        if line is not None and line.indent > indent:
            self.refuse("indented deeper than its mapping")
        return found

    def items(self, indent: int) -> list[Value]:
        found: list[Value] = []
        while (line := self.peek()) is not None and line.indent == indent:
            if not line.text.startswith("- "):
                self.refuse("a `- item` expected")
            rest = line.text[2:]
            if KEY.match(rest) and not rest.startswith(("'", '"')):
                # `- key: value ...`: a mapping whose keys line up with this one's
                self.lines[self.at] = Line(line.number, indent + 2, rest, line.raw)
                found.append(self.pairs(indent + 2))
            else:
                self.at += 1
                found.append(self.folded(rest, indent))
        return found

    def value(self, rest: str | None, indent: int) -> Value:
        """What follows `key:`: a nested block, a `|` block, or a scalar."""
        if rest is None or rest.startswith("#"):
            line = self.peek()
            return self.block(line.indent) if line is not None and line.indent > indent else None
        if rest == "|":
            return self.literal(indent)
        return self.folded(rest, indent)

    def literal(self, indent: int) -> str:
        """A `|` block: its lines as they are, less the first line's indent, newline-ended."""
        taken: list[str] = []
        while self.at < len(self.lines):
            line = self.lines[self.at]
            if line.text and line.indent <= indent:
                break
            taken.append(line.raw)
            self.at += 1
        while taken and not taken[-1].strip():
            taken.pop()
        if not taken:
            self.refuse("an empty `|` block")
        margin = len(taken[0]) - len(taken[0].lstrip(" "))
        if any(raw.strip() and len(raw) - len(raw.lstrip(" ")) < margin for raw in taken):
            self.refuse("a `|` block whose first line is indented deeper than the rest")
        return "\n".join(raw[margin:] for raw in taken) + "\n"

    def folded(self, first: str, indent: int) -> Value:
        """A scalar, with the deeper-indented lines that continue a plain one joined by spaces."""
        parts = [first]
        while (line := self.peek()) is not None and line.indent > indent:
            if first.startswith(("'", '"', "[")):
                self.refuse("a quoted or [flow] value continued on the next line")
            parts.append(line.text)
            self.at += 1
        return self.scalar(" ".join(parts))

    def scalar(self, text: str) -> Value:
        text = _uncommented(text)
        if text.startswith("[") and text.endswith("]"):
            inner = text[1:-1].strip()
            return [self.scalar(part.strip()) for part in inner.split(",")] if inner else []
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
            inner = text[1:-1]
            if text[0] == '"' and ("\\" in inner or '"' in inner):
                self.refuse("escapes in a double-quoted value")
            return inner.replace("''", "'") if text[0] == "'" else inner
        if text[:1] in "'\"[]{}&*!|>%@`,?:-#" or ": " in text or text.endswith(":"):
            self.refuse(f"{text!r} is not a plain value")
        return text


def _uncommented(text: str) -> str:
    """`text` without its comment: after a quoted value's closing quote, or from the first
    ` #` of a plain one (shell quotes mean nothing to YAML)."""
    if text[:1] not in "'\"":
        return re.split(r"\s#", text, maxsplit=1)[0].rstrip()
    at = 1
    while (at := text.find(text[0], at)) >= 0 and text[0] == "'" and text[at + 1 : at + 2] == "'":
        at += 2
    if at < 0 or (text[at + 1 :].strip() and not re.match(r"\s+#", text[at + 1 :])):
        return text  # left for `scalar` to refuse
    return text[: at + 1]
