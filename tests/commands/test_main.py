from __future__ import annotations

import subprocess
import sys

from ci_evals.main import main


def test_unknown_command_lists_valid_ones(capsys: object) -> None:
    assert main(["no-such-command"]) == 2


def test_help_lists_commands() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ci_evals", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "compute-stage" in out
    assert "check-coverage" in out
