"""How long the pre-commit hooks' imports take in a fresh interpreter.

Each hook runs as a commit runs it, in a copy of the labsmith example (its own
git repository), under `python -X importtime`: the cumulative time of every
top-level import after the interpreter started (lazy imports during the run
included). The minimum of the repeats is printed, since a loaded machine only
ever adds time. Issue 23 set 150 ms for `check-coverage` and `compute-stage`;
tests/test_hook_imports.py holds what they import (no third-party package, a
ceiling on the module count), which does not flake on a busy machine.

    .venv/bin/python benchmarks/bench_hook_imports.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import copy_example
from tests.test_hook_imports import HOOKS, MARK, PROBE

TARGET_MS = {"check-coverage": 150.0, "compute-stage": 150.0}


def import_ms(root: Path, env: dict[str, str], argv: list[str]) -> float:
    """The top-level import milliseconds after the probe's mark, of one fresh run."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", PROBE, *argv],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    micros = 0
    for line in result.stderr.split(MARK + "\n", 1)[1].splitlines():
        parts = line.split("|")
        if not line.startswith("import time:") or len(parts) != 3:
            continue
        cumulative, name = parts[1].strip(), parts[2]
        # Top level: one space before the name (nested imports are indented further).
        if cumulative.isdigit() and not name.startswith("  "):
            micros += int(cumulative)
    return micros / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        root = copy_example(Path(temp) / "labsmith").root
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
        subprocess.run(["git", "add", "."], cwd=root, check=True)
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"],
            cwd=root,
            check=True,
        )
        # Bytecode written once and reused, as an installed package's is.
        env = {**os.environ, "PYTHONPYCACHEPREFIX": str(Path(temp) / "pyc")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.pop("GITHUB_ACTIONS", None)
        for hook, argv in HOOKS.items():
            import_ms(root, env, argv)  # the bytecode and the map cache
            best = min(import_ms(root, env, argv) for _ in range(args.repeats))
            target = TARGET_MS.get(hook)
            against = f"  (target {target:.0f} ms)" if target else ""
            print(f"{hook:32} {best:6.1f} ms{against}")


if __name__ == "__main__":
    main()
