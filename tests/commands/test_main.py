from __future__ import annotations

import subprocess
import sys

import pytest

from ci_evals.commands import COMMANDS
from ci_evals.main import main


def test_unknown_command_lists_valid_ones(capsys: object) -> None:
    assert main(["no-such-command"]) == 2


def test_help_lists_commands() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ci_evals", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "compute-stage" in out
    assert "check-coverage" in out


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_builds_its_options(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`ci-evals CMD --help` for every command: two branches each adding an option to a
    helper shared by several commands (`forecast`'s and `report`'s `--history`) made
    argparse refuse the parser — the command crashed before it read its arguments."""
    with pytest.raises(SystemExit) as exited:
        main([name, "--help"])
    assert exited.value.code == 0
    assert "usage: ci-evals" in capsys.readouterr().out
