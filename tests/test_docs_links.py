"""The README stays short and every fact it used to hold stays reachable.

The README keeps what a newcomer needs (what it is, the quickstart, the
onboarding commands, the command table, links); the reference lives in docs/.
Each section of docs/tour.md and docs/stage-map.md (the README's former body)
must be linked, by its anchor, from the README or docs/index.md, and every
link from the README and the docs pages to a page of this repository must name
a file that exists and a heading that it has.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.paths import REPO

PAGES = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])
MOVED = [REPO / "docs" / "tour.md", REPO / "docs" / "stage-map.md"]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to `-`."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def headings(page: Path) -> list[str]:
    found, fenced = [], False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6} (.+)", line)):
            found.append(m[1])
    return found


def links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return LINK.findall(text)


def test_slug_is_github_s() -> None:
    assert slug("Running stages: `ci-evals run`") == "running-stages-ci-evals-run"
    assert slug("Your own plugin — or someone else's") == "your-own-plugin--or-someone-elses"
    assert slug("The run as a site (`--html`)") == "the-run-as-a-site---html"


def test_the_readme_is_short_and_keeps_the_quickstart() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    quick = readme.split("## Quickstart\n", 1)[1].split("```")[1].strip().splitlines()
    assert len(quick) == 2  # fresh-clone-check runs each line
    # .ci/run runs this command, adding only --durations=30 (CI names its slowest tests).
    test_command = quick[1].rsplit(" && ", 1)[1]
    assert test_command == ".venv/bin/pytest -q -p no:cacheprovider"
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert ci[-1] == test_command + " --durations=30"
    titles = headings(REPO / "README.md")
    assert len(titles) == len(set(titles)), titles  # each section once
    for image in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", readme):
        assert (REPO / image).is_file(), image


def targets(page: Path) -> set[tuple[Path, str]]:
    """(file, anchor) of each local link of `page`."""
    found = set()
    for target in links(page):
        path, _, anchor = target.partition("#")
        found.add(((page.parent / path).resolve(), anchor))
    return found


@pytest.mark.parametrize("page", MOVED, ids=lambda p: p.name)
def test_every_moved_section_is_linked_from_the_readme_or_the_index(page: Path) -> None:
    linked = targets(REPO / "README.md") | targets(REPO / "docs" / "index.md")
    for heading in headings(page)[1:]:
        assert (page.resolve(), slug(heading)) in linked, (
            f"docs/{page.name}#{slug(heading)}: linked from neither README.md nor docs/index.md"
        )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_local_links_name_a_page_and_a_heading_it_has(page: Path) -> None:
    for target in links(page):
        if re.match(r"[a-z]+:", target) or target.startswith(("#", "<")):  # a URL, a placeholder
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve()
        assert file.exists(), f"{page.name}: {target}: no such file"
        if anchor and file.suffix == ".md":
            anchors = {slug(h) for h in headings(file)}
            assert anchor in anchors, f"{page.name}: {target}: no such heading"
