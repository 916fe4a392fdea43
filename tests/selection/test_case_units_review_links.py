"""Review of issue 32: a case reads what a link in its folder leads to (the case's
copy follows links inside the repository, `run.case_context.copy_case`), so a change
to that target is a change of the case, as `selection.links` holds for the plugin.

Here the `smalltalk` case's folder links to the refund skill's folder. A change to
`skills/refund/policy.md` reaches the refund cases by the drafted entry, and
`smalltalk` through its link: it must be selected too (or every case).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ci_evals.main import main
from tests.case_units_repo import PLUGIN, commit, plugin_repo, write
from tests.conftest import git


def test_a_change_a_case_reads_through_a_link_in_its_folder_selects_that_case(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    plugin_repo(repo)
    monkeypatch.chdir(repo)
    assert main(["init", PLUGIN]) == 0
    os.symlink("../../skills/refund", repo / PLUGIN / "evals" / "smalltalk" / "policy")
    base = commit(repo, "ci-evals init; smalltalk reads the refund policy through a link")
    capsys.readouterr()
    write(repo, {f"{PLUGIN}/skills/refund/policy.md": "Refunds over 100 dollars.\n"})
    commit(repo, "a stricter policy")
    assert git(repo, "ls-files", "-s", f"{PLUGIN}/evals/smalltalk/policy").startswith("120000")
    assert main(["compute-stage", base, "--json"]) == 0
    units = json.loads(capsys.readouterr().out)["units"]
    assert units["all"] or "smalltalk" in units["ids"], units
