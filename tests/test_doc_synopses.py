"""Each docs page's synopsis (its first code block, `ci-evals CMD ...` lines) names
the options `ci-evals CMD --help` has: none that argparse lacks, and, unless a
synopsis line ends in ` ...` (abridged), every option argparse has."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.paths import REPO

ROOT = REPO
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z-]*")


def synopses() -> list[tuple[str, str, str]]:
    """(page, command, synopsis) for each `ci-evals CMD [...` line (and the indented
    lines continuing it) in a page's first code block."""
    found: dict[tuple[str, str], str] = {}
    for page in sorted((ROOT / "docs").glob("*.md")):
        blocks = page.read_text(encoding="utf-8").split("```")
        first = re.sub(r"\\\n", " ", blocks[1] if len(blocks) > 1 else "")
        for match in re.finditer(r"^ci-evals (\S+) .*\[.*(?:\n[ \t]+\S.*)*", first, re.M):
            key = (page.name, match[1])  # a page's synopses of one command read together
            found[key] = found.get(key, "") + match[0].split("#")[0] + "\n"
    return [(page, command, text) for (page, command), text in found.items()]


def help_options(command: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-m", "ci_evals", command, "--help"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return set(OPTION.findall(done.stdout.split("\n\n")[0])) - {"--help"}


def test_the_pages_have_synopses() -> None:
    assert {page for page, _, _ in synopses()} >= {"compute-stage.md", "report.md", "run.md"}


@pytest.mark.parametrize(("page", "command", "synopsis"), synopses())
def test_a_synopsis_names_the_options_argparse_has(page: str, command: str, synopsis: str) -> None:
    documented = set(OPTION.findall(synopsis))
    has = help_options(command)
    assert documented - has == set(), f"{page}: options `ci-evals {command}` lacks"
    if not re.search(r"\s\.\.\.$", synopsis, re.M):  # ` ...` abridges; `]...` repeats
        assert has - documented == set(), f"{page}: options its synopsis omits"


def test_suite_doc_documents_the_agent_and_sandbox_keys() -> None:
    text = (ROOT / "docs" / "suite.md").read_text()
    assert "\nagent: claude" in text
    assert "\nsandbox: bwrap" in text
