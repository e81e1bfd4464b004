"""Finding README's CI jobs (`tests.ci_recipes`): a section that changed shape fails, naming
what it lacks or what is not as expected, rather than run something else."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.ci_recipes import UnreadableRecipe, read_recipes, scalar, sequence, variables

GITHUB = "```yaml\n# .github/workflows/storyshelf.yml\njobs:\n  review:\n    steps: []\n```\n"
GITLAB = "```yaml\n# .gitlab-ci.yml\nstages: [build, test]\n```\n"
IN_JOB = "```sh\nstoryshelf run --drain\n```\n"


def readme(tmp_path: Path, section: str) -> Path:
    path = tmp_path / "README.md"
    path.write_text(f"# x\n\n## Use it in CI\n\n{section}\n## Next\n\n```sh\nls\n```\n")
    return path


def test_the_section_s_blocks_are_read_by_the_file_they_name(tmp_path: Path) -> None:
    recipes = read_recipes(readme(tmp_path, f"{GITLAB}\n{GITHUB}\n{IN_JOB}"))
    assert recipes.github == {"jobs": {"review": {"steps": []}}}
    assert recipes.gitlab == {"stages": ["build", "test"]}
    assert recipes.in_job == "storyshelf run --drain\n"


def test_a_readme_without_the_section_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "README.md"
    path.write_text("# x\n\n## Use it elsewhere\n")
    with pytest.raises(UnreadableRecipe, match=r"README\.md has no '## Use it in CI' section"):
        read_recipes(path)


def test_a_ci_section_without_both_jobs_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnreadableRecipe, match=r"holds yaml \['# .gitlab-ci.yml'\] and 1 sh"):
        read_recipes(readme(tmp_path, f"{GITLAB}\n{IN_JOB}"))


def test_a_job_that_is_not_yaml_is_refused_with_its_line(tmp_path: Path) -> None:
    broken = GITLAB.replace("stages: [build, test]", "stages: [build, test\nstoryshelf: x")
    with pytest.raises(UnreadableRecipe, match=r"# .gitlab-ci.yml: not YAML: (?s:.*)line 3"):
        read_recipes(readme(tmp_path, f"{broken}\n{GITHUB}\n{IN_JOB}"))


def test_a_job_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    listed = GITLAB.replace("stages: [build, test]", "- build")
    with pytest.raises(
        UnreadableRecipe, match=r"gitlab-ci.yml: a mapping expected, not \['build'\]"
    ):
        read_recipes(readme(tmp_path, f"{listed}\n{GITHUB}\n{IN_JOB}"))


def test_a_script_line_with_a_colon_reads_as_a_mapping_and_is_refused() -> None:
    """YAML reads `key: value` in a plain line, so this shell line is not the command it shows."""
    (line,) = sequence(yaml.safe_load('- echo "report: $URL"\n'), "script")
    with pytest.raises(UnreadableRecipe, match=r"script: a string expected, not \{'echo \"report'"):
        scalar(line, "script")


def test_variables_are_strings_as_the_shell_receives_them() -> None:
    assert variables(yaml.safe_load("A: https://x.example  # a comment\nB: '3.11'\n"), "env") == {
        "A": "https://x.example",
        "B": "3.11",
    }
    with pytest.raises(UnreadableRecipe, match=r"env B: a string expected, not 3\.11"):
        variables(yaml.safe_load("B: 3.11\n"), "env")
