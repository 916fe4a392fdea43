"""Image recipes: validation at file:line, and the hash that names the image."""

from __future__ import annotations

from pathlib import Path

import pytest

from ci_evals.errors import UserError
from ci_evals.sandbox.docker.recipe import RECIPES, find_recipe, load_recipe


def write(folder: Path, text: str) -> Path:
    path = folder / "recipe.yaml"
    path.write_text(text)
    return path


def test_the_shipped_recipe_loads() -> None:
    recipe = load_recipe(find_recipe("python-mcp", Path("/nonexistent")))
    assert recipe.packages == ("python3",) and recipe.wheels == ("mcp==2.3.0",)
    assert recipe.tag.startswith("ci-evals/python-mcp:") and len(recipe.tag.split(":")[1]) == 16
    assert recipe.file == RECIPES / "python-mcp" / "recipe.yaml"


@pytest.mark.parametrize(
    ("text", "where", "said"),
    [
        ("name: x\nsuite: bookworm\npackages: [python3]\nlanguage: go\n", ":4:1", "unknown key"),
        ("name: Bad Name\nsuite: bookworm\npackages: []\n", ":1:7", "is not valid"),
        ("name: x\nsuite: bookworm\npackages: [gcc]\nwheels: [mcp]\n", ":4:9", "need python3"),
        (
            "name: x\nsuite: bookworm\npackages: [python3]\nwheels: ['--index-url=h']\n",
            ":4:10",
            "one requirement",
        ),
        ("name: x\nsuite: bookworm\npackages: ['a;b']\n", ":3:12", "package name"),
        (
            "name: x\nsuite: bookworm\npackages: []\nfiles: {missing: /x}\n",
            ":4:18",
            "does not exist",
        ),
        ("name: x\nsuite: bookworm\npackages: []\nfiles: {../..: /x}\n", ":4:16", "outside"),
        (
            "name: x\nsuite: bookworm\npackages: []\nenv: {'A B': x}\n",
            ":4:14",
            "not an environment",
        ),
    ],
)
def test_a_bad_recipe_is_one_line_at_file_line(
    tmp_path: Path, text: str, where: str, said: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(UserError) as caught:
        load_recipe(path)
    message = str(caught.value)
    assert message.startswith(f"{path}{where}") and said in message, message
    assert "\n" not in message


def test_the_tag_follows_every_input_of_the_image(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    tool = tmp_path / "bin" / "tool"
    tool.write_text("#!/bin/sh\necho 1\n")
    text = "name: t\nsuite: bookworm\npackages: [python3]\nfiles: {bin: /usr/local/bin}\n"
    first = load_recipe(write(tmp_path, text)).tag
    assert load_recipe(write(tmp_path, text)).tag == first  # the same inputs: reused
    tool.write_text("#!/bin/sh\necho 2\n")
    second = load_recipe(write(tmp_path, text)).tag
    tool.chmod(0o755)
    third = load_recipe(write(tmp_path, text)).tag
    with_wheel = load_recipe(write(tmp_path, text + "wheels: [mcp]\n")).tag
    more = load_recipe(write(tmp_path, text.replace("[python3]", "[python3, gcc]"))).tag
    assert len({first, second, third, with_wheel, more}) == 5


def test_an_unknown_recipe_names_the_shipped_ones(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="python-mcp"):
        find_recipe("nope", tmp_path)
    path = write(tmp_path, "name: x\nsuite: bookworm\npackages: []\n")
    assert find_recipe(str(tmp_path), Path("/")) == path.resolve()
    assert find_recipe("recipe.yaml", tmp_path) == path.resolve()
