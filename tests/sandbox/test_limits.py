"""Bounded bombs against the real `bwrap` and `local` sandboxes: pids, memory, file size, disk.

Every bomb is bounded in count, size and time by itself, so that it cannot
hurt the machine even if the limit under test failed: a fork loop of at most
2,000 sleepers (20 s each), at most 768 MiB of memory, at most 8 files of
24 MiB. The limits are set low in the spec so the bombs meet them first.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from ci_evals.agents import StageOutcome, over_memory
from ci_evals.sandbox.base import SandboxSpec
from ci_evals.sandbox.bwrap import BwrapSandbox, available
from ci_evals.sandbox.local import LocalSandbox

ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
PYTHON = "/usr/bin/python3"  # the system's, inside bwrap too (/usr is bound)
MIB = 1 << 20

FORK_BOMB = """
import os, sys, time
started = 0
for _ in range(2000):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(20)
        os._exit(0)
    started += 1
print(started, flush=True)
"""

MEMORY_BOMB = """
import sys
chunks, step = [], 64 << 20
try:
    while len(chunks) * step < int(sys.argv[1]):
        chunks.append(bytearray(step))  # zero-filled: every page touched
except MemoryError:
    print("refused", len(chunks), flush=True)
    sys.exit(3)
print("allocated", len(chunks), flush=True)
"""


@pytest.fixture(params=["bwrap", "local"])
def kind(request: pytest.FixtureRequest) -> str:
    if request.param == "bwrap" and (reason := available()) is not None:
        pytest.fail(reason)
    assert Path(PYTHON).exists(), "the tests need the system's python3"
    return str(request.param)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def open_box(kind: str, spec: SandboxSpec) -> BwrapSandbox | LocalSandbox:
    return BwrapSandbox(spec) if kind == "bwrap" else LocalSandbox(spec)


@pytest.fixture
def box(kind: str, ws: Path) -> Iterator[BwrapSandbox | LocalSandbox]:
    spec = SandboxSpec(
        writable=(ws,), pids=64, memory_bytes=256 * MIB, address_space_bytes=1 << 30,
        disk_bytes=24 * MIB,
    )  # fmt: skip
    with open_box(kind, spec) as sandbox:
        yield sandbox


def test_the_limits_are_what_the_sandbox_says(box: BwrapSandbox | LocalSandbox, ws: Path) -> None:
    enforced = box.enforced
    # RLIMIT_AS only where no cgroup bounds memory (it would fail ASan programs)
    address_space = None if enforced.memory_bytes is not None else 1 << 30
    assert (enforced.pids, enforced.address_space_bytes) == (64, address_space)
    assert enforced.disk_bytes == 24 * MIB
    limits = box.exec(["cat", "/proc/self/limits"], cwd=ws, env=ENV, timeout=20).stdout.decode()
    rows = {line[:26].strip(): line[26:].split() for line in limits.splitlines()[1:]}
    expected = "unlimited" if address_space is None else str(address_space)
    assert rows["Max address space"][:2] == [expected] * 2  # soft = hard: not raised again
    assert rows["Max file size"][:2] == [str(24 * MIB)] * 2
    assert rows["Max processes"][0] == rows["Max processes"][1] != "unlimited"


def test_a_fork_bomb_stops_at_the_pid_limit(box: BwrapSandbox | LocalSandbox, ws: Path) -> None:
    if os.getuid() == 0 and box.enforced.memory_bytes is None:
        pytest.fail("as root RLIMIT_NPROC is not enforced and no cgroup could be made here")
    done = box.exec([PYTHON, "-c", FORK_BOMB], cwd=ws, env=ENV, timeout=60)
    assert done.returncode == 0, done.stderr
    started = int(done.stdout)
    assert 0 < started < 64, started  # the sandbox's own processes count too


def test_a_memory_bomb_meets_the_address_space_limit(
    box: BwrapSandbox | LocalSandbox, ws: Path
) -> None:
    done = box.exec([PYTHON, "-c", MEMORY_BOMB, str(768 * MIB)], cwd=ws, env=ENV, timeout=60)
    if box.enforced.memory_bytes is not None:  # the cgroup's 256 MiB comes first: OOM kill
        assert done.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL, 3), done
    else:
        assert done.returncode == 3, done
    assert b"allocated" not in done.stdout
    # over the address space with no cgroup in the way: refused outright
    big = box.exec([PYTHON, "-c", MEMORY_BOMB, str(2 << 30)], cwd=ws, env=ENV, timeout=60)
    assert b"allocated" not in big.stdout, big


def test_a_cgroup_bounds_memory_where_one_can_be_made(
    box: BwrapSandbox | LocalSandbox, ws: Path
) -> None:
    if box.enforced.memory_bytes is None:
        pytest.skip("optional: no cgroup can be made here (not root, no delegated v2 subtree)")
    # 320 MiB: within the address space (1 GiB), over the cgroup's 256 MiB
    done = box.exec([PYTHON, "-c", MEMORY_BOMB, str(320 * MIB)], cwd=ws, env=ENV, timeout=60)
    assert done.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), done  # the OOM killer
    assert b"allocated" not in done.stdout


def test_a_process_killed_at_the_memory_limit_is_named_in_the_stage_error(
    kind: str, ws: Path
) -> None:
    spec = SandboxSpec(writable=(ws,), pids=64, memory_bytes=256 * MIB)
    with open_box(kind, spec) as box:
        if box.enforced.memory_bytes is None:
            pytest.skip("optional: no cgroup can be made here (not root, no delegated v2 subtree)")
        assert box.memory_killed is None
        done = box.exec([PYTHON, "-c", MEMORY_BOMB, str(320 * MIB)], cwd=ws, env=ENV, timeout=60)
        assert done.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), done
    assert box.memory_killed == 256 * MIB  # still known once the cgroup is gone
    failed = StageOutcome(status="error", error="Exception: Command failed with exit code 137")
    said = str(over_memory(failed, box).error)
    assert said.startswith("the sandbox's memory limit (256 MiB) was reached"), said
    assert "exit code 137" in said  # the CLI's own words kept after it
    finished = over_memory(StageOutcome(status="completed"), box)
    assert finished.error is None  # a tool killed, the stage went on: not an error


def test_a_file_stops_at_the_file_size_limit(box: BwrapSandbox | LocalSandbox, ws: Path) -> None:
    done = box.exec(["sh", "-c", "head -c 40M /dev/zero > big"], cwd=ws, env=ENV, timeout=60)
    assert done.returncode != 0  # SIGXFSZ, or EFBIG
    assert (ws / "big").stat().st_size == 24 * MIB
    assert not box.over_quota  # one file at the cap: the folder grew by exactly the quota


def test_a_disk_bomb_is_killed_by_the_quota(box: BwrapSandbox | LocalSandbox, ws: Path) -> None:
    script = "for i in 1 2 3 4 5 6 7 8; do head -c 20M /dev/zero > f$i; done; sleep 30"
    done = box.exec(["sh", "-c", script], cwd=ws, env=ENV, timeout=60)
    assert box.over_quota
    # SIGKILL: killed, not ended by its sleep (which exits 0)
    assert done.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), done
    assert sum(f.stat().st_size for f in ws.iterdir()) <= 8 * 20 * MIB
    with pytest.raises(OSError, match="disk quota"):  # and nothing more runs there
        box.exec(["true"], cwd=ws, env=ENV, timeout=20)
