"""The docker sandbox's cost vs `docker run --rm` of the same image, on the same machine.

- baseline: `docker run --rm --network none IMAGE true` (the CLI: create,
  start, attach, wait, remove);
- sandbox: `DockerSandbox(spec)` + `exec(["true"])` + `close()` (create with
  every limit, mounts and labels, start, one exec through the exec API with
  the group wrapper, forced removal);
- exec only: one more `exec(["true"])` in an open sandbox (what every tool
  call of an agent costs), vs `docker exec CONTAINER true`;
- 4 at once: four sandboxes (start + exec + removal) in four threads, vs four
  `docker run --rm` at once; and vs one sandbox (how well they overlap).

    .venv/bin/python benchmarks/bench_docker.py [--repeats 10] [--image TAG]

Without `--image`, the shipped `python-mcp` recipe's image (built first if
missing). Each figure is the median of REPEATS runs after one untimed warm-up.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.timing import median_seconds
from ci_evals.sandbox.base import SandboxSpec
from ci_evals.sandbox.docker import engine
from ci_evals.sandbox.docker.engine import DockerSandbox
from ci_evals.sandbox.docker.image_build import cache_dir, ensure_image
from ci_evals.sandbox.docker.recipe import find_recipe, load_recipe

ENV = {"PATH": "/usr/bin:/bin"}


def _sandbox_once(spec: SandboxSpec) -> None:
    with DockerSandbox(spec) as box:
        done = box.exec(["true"], cwd=box.workspace, env=ENV, timeout=60)
        if done.returncode != 0:
            raise SystemExit(f"true failed in the sandbox: {done.stderr!r}")


def _docker_run(image: str) -> None:
    subprocess.run(
        ["docker", "run", "--rm", "--network", "none", image, "true"],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def _four(action: object) -> None:
    with ThreadPoolExecutor(4) as pool:
        for future in [pool.submit(action) for _ in range(4)]:  # type: ignore[arg-type]
            future.result()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--image")
    args = parser.parse_args()
    why = engine.available()
    if why is not None:
        print(why, file=sys.stderr)
        return 1
    image = args.image or ensure_image(
        load_recipe(find_recipe("python-mcp", Path.cwd())), cache_dir(os.environ)
    )

    def timed(action: object) -> float:
        action()  # type: ignore[operator]  # warm-up
        return median_seconds(action, args.repeats)  # type: ignore[arg-type]

    rows: list[tuple[str, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        workspaces = [Path(tmp) / str(n) for n in range(4)]
        for folder in workspaces:
            folder.mkdir()
        specs = [SandboxSpec(writable=(w,), image=image, run_id="bench") for w in workspaces]
        run_rm = timed(lambda: _docker_run(image))
        one = timed(lambda: _sandbox_once(specs[0]))
        rows.append(("sandbox start + exec + removal", one, run_rm))
        with DockerSandbox(specs[0]) as box:
            cli_exec = timed(
                lambda: subprocess.run(["docker", "exec", box.container_id, "true"], check=True)
            )
            inner = timed(lambda: box.exec(["true"], cwd=box.workspace, env=ENV, timeout=60))
        rows.append(("exec in an open sandbox", inner, cli_exec))
        four_rm = timed(lambda: _four(lambda: _docker_run(image)))
        counter = iter(range(1 << 30))
        four = timed(lambda: _four(lambda: _sandbox_once(specs[next(counter) % 4])))
        rows.append(("4 sandboxes at once", four, four_rm))
        rows.append(("4 sandboxes at once vs 1", four, one))

    print(f"median of {args.repeats} runs; image {image}; baseline = right-hand figure")
    for name, ours, base in rows:
        print(f"{name:34s} {ours * 1000:7.1f} ms  vs {base * 1000:7.1f} ms  = {ours / base:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
