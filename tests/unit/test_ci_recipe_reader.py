"""The reader of README's CI jobs (`tests.ci_recipes`): it means what YAML means by the part it
takes, and refuses any other shape with its line rather than run something else."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ci_recipes import UnreadableRecipe, Value, read_recipes, read_yaml

READS = [
    ("on:\n  pull_request:\n  push:\n    branches: [main]\n",
     {"on": {"pull_request": None, "push": {"branches": ["main"]}}}),
    ("env:\n  A: ${{ secrets.A }}  # a comment\n  B: \"3.11\"\n  C: 'it''s'\n",
     {"env": {"A": "${{ secrets.A }}", "B": "3.11", "C": "it's"}}),
    ("steps:\n  - uses: a/b@v4\n    with:\n      x: 1\n  - run: |\n      one \\\n        two\n\n      # kept\n",
     {"steps": [{"uses": "a/b@v4", "with": {"x": "1"}}, {"run": "one \\\n  two\n\n# kept\n"}]}),
    ("script:\n  - echo one\n    two > out\n  - echo 'a # b'\n  - \"echo a # b\"  # c\n",
     {"script": ["echo one two > out", "echo 'a", "echo a # b"]}),
]  # fmt: skip

REFUSED = [
    ("script:\n  - echo \"report: $URL\"\n", "line 2", "not a plain value"),
    ("a: &anchor x\n", "line 1", "not a plain value"),
    ("a: {b: 1}\n", "line 1", "not a plain value"),
    ("a:\n- b\n", "line 2", "`key: value` expected"),
    ("a: 1\na: 2\n", "line 2", "given twice"),
    ('a: "x\\ny"\n', "line 1", "escapes"),
    ("a: 1\n  b: 2\n", "line 2", "not a plain value"),
]  # fmt: skip


@pytest.mark.parametrize(("source", "meant"), READS)
def test_the_reader_means_what_yaml_means(source: str, meant: Value) -> None:
    assert read_yaml(source) == meant


@pytest.mark.parametrize(("source", "where", "why"), REFUSED)
def test_a_shape_the_reader_does_not_take_is_refused_at_its_line(
    source: str, where: str, why: str
) -> None:
    with pytest.raises(UnreadableRecipe, match=why) as refused:
        read_yaml(source)
    assert where in str(refused.value)


def test_a_ci_section_without_both_jobs_is_refused(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(
        "# x\n\n## Use it in CI\n\n```yaml\n# .gitlab-ci.yml\na: b\n```\n\n```sh\nls\n```\n\n## Next\n"
    )
    with pytest.raises(UnreadableRecipe, match=r"holds yaml \['# .gitlab-ci.yml'\] and 1 sh"):
        read_recipes(readme)
