"""The preloaded object that makes the Claude CLI non-dumpable (`sandbox/nondumpable.py`),
loaded by the system's real dynamic linker into real programs.

The end-to-end tests (the real CLI, a Bash tool command trying its memory) are
in test_sandbox_cli_memory.py; these show the object itself: it loads, the
process it is loaded into is non-dumpable, a process it cannot protect does not
run, and a program that would ignore it is refused.
"""

from __future__ import annotations

import contextlib
import os
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ci_evals.sandbox import nondumpable

MACHINE = os.uname().machine
PYTHON = "/usr/bin/python3"
READ_FLAG = "import ctypes; print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))"  # PR_GET_DUMPABLE

# Run argv[1:] with prctl refused (EPERM) by a seccomp filter: the object's
# prctl calls then fail, as they would under a filter we do not know of.
REFUSE_PRCTL = """
import ctypes, os, sys
nr = {"x86_64": 157, "aarch64": 167}[os.uname().machine]
arch = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}[os.uname().machine]
rows = [(0x20, 0, 0, 4), (0x15, 1, 0, arch), (0x06, 0, 0, 0x7FFF0000), (0x20, 0, 0, 0),
        (0x15, 0, 1, nr), (0x06, 0, 0, 0x00050001), (0x06, 0, 0, 0x7FFF0000)]
class F(ctypes.Structure):
    _fields_ = (("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint))
class P(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.POINTER(F)))
table = (F * len(rows))(*(F(*row) for row in rows))
libc = ctypes.CDLL(None)
assert libc.prctl(38, ctypes.c_ulong(1), 0, 0, 0) == 0
assert libc.prctl(22, ctypes.c_ulong(2), ctypes.byref(P(len(rows), table)), 0, 0) == 0
os.execv(sys.argv[1], sys.argv[1:])
"""

pytestmark = pytest.mark.skipif(
    MACHINE not in ("x86_64", "aarch64"), reason="an object is written for x86_64 and aarch64"
)


@pytest.fixture
def preload() -> Path:
    with nondumpable.preloaded(Path(PYTHON)) as path:
        yield path


def _run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin"} | (env or {})
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)


def _preloaded(preload: Path, *argv: str) -> list[str]:
    return nondumpable.preloading(preload, argv)  # as the agent starts the CLI


def test_a_process_it_is_preloaded_into_is_not_dumpable(preload: Path) -> None:
    assert _run([PYTHON, "-c", READ_FLAG]).stdout == "1\n"  # the kernel's default
    loaded = _run(_preloaded(preload, PYTHON, "-c", READ_FLAG))
    assert (loaded.returncode, loaded.stdout, loaded.stderr) == (0, "0\n", "")


SHOW_ENV = "import os; print(sorted(os.environ))"
# execve(argv[1], [argv[1], "-c", argv[2]], argv[3:]): an environment with any
# entries, twice the same name included (os.execve takes a mapping).
EXECVE = """
import ctypes, sys
program, code, entries = sys.argv[1].encode(), sys.argv[2].encode(), sys.argv[3:]
argv = (ctypes.c_char_p * 4)(program, b"-c", code, None)
envp = (ctypes.c_char_p * (len(entries) + 1))(*[e.encode() for e in entries], None)
ctypes.CDLL(None).execve(program, argv, envp)
"""


def test_it_takes_ld_preload_out_of_the_environment_and_nothing_else(preload: Path) -> None:
    # What the process starts (the CLI's tools, hooks, MCP servers) must not load it:
    # a -fsanitize=address program refuses to start after another preloaded library.
    entries = ["A=1", f"LD_PRELOAD={preload}", "LD_PRELOAD_NOT=2", f"LD_PRELOAD={preload}", "Z=3"]
    done = _run([sys.executable, "-c", EXECVE, PYTHON, SHOW_ENV, *entries])  # it twice
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == str(["A", "LC_CTYPE", "LD_PRELOAD_NOT", "Z"]) + "\n"
    child = _run(
        _preloaded(
            preload,
            PYTHON,
            "-c",
            f"import subprocess; subprocess.run({[PYTHON, '-c', READ_FLAG]!r})",
        )
    )
    assert child.stdout == "1\n"  # the child runs as it would without us


def test_its_folder_is_readable_by_every_uid_and_gone_afterwards() -> None:
    with nondumpable.preloaded(Path(PYTHON)) as path:
        assert path.stat().st_mode & 0o777 == 0o444
        assert path.parent.stat().st_mode & 0o777 == 0o755
    assert not path.parent.exists()


def test_a_process_it_cannot_make_non_dumpable_does_not_run(preload: Path) -> None:
    done = _run([sys.executable, "-c", REFUSE_PRCTL, *_preloaded(preload, PYTHON, "-c", "1")])
    assert done.returncode == nondumpable.EXIT_STATUS
    assert done.stdout == ""
    assert done.stderr == nondumpable.REFUSAL.decode()


def test_a_static_program_is_refused_by_name(tmp_path: Path) -> None:
    static = tmp_path / "claude"
    static.write_bytes(nondumpable.shared_object(MACHINE))  # an ELF that names no interpreter
    assert not nondumpable.loads_preload(static)
    refused = pytest.raises(nondumpable.NotProtectable, match=f"^{static}: a statically linked")
    with refused, nondumpable.preloaded(static):
        pass


def test_dynamic_programs_load_it(tmp_path: Path) -> None:
    assert nondumpable.loads_preload(Path(PYTHON))
    assert not nondumpable.loads_preload(Path(__file__))  # neither ELF nor script


def _protected(program: Path, *argv: str) -> str | None:
    """PR_GET_DUMPABLE as `program` prints it, started as the agent starts the CLI,
    or None when `preloaded` refuses it."""
    try:
        with nondumpable.preloaded(program) as path:
            done = _run(_preloaded(path, *argv))
    except nondumpable.NotProtectable:
        return None
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("interpreter", ["/usr/bin/env python3", PYTHON])
def test_a_script_cli_never_runs_dumpable(tmp_path: Path, interpreter: str) -> None:
    # The object is loaded by the first dynamically linked program started with
    # LD_PRELOAD, which it then takes out of the environment: for a script that
    # is the interpreter, and `#!/usr/bin/env node` (npm's cli.js) execs node
    # without it, as a shell wrapper execs what it wraps.
    script = tmp_path / "claude"
    script.write_text(f"#!{interpreter}\n{READ_FLAG}\n")
    script.chmod(0o755)
    assert _protected(script, str(script)) in (None, "0\n")


@contextlib.contextmanager
def _temporary_folder(folder: Path) -> Iterator[None]:
    saved = tempfile.tempdir
    tempfile.tempdir = str(folder)
    try:
        yield
    finally:
        tempfile.tempdir = saved


@pytest.mark.parametrize("name", ["with space", "with:colon"])
def test_a_folder_the_linker_cannot_preload_from_is_refused(tmp_path: Path, name: str) -> None:
    # glibc's dynamic linker splits LD_PRELOAD at spaces and colons and skips an
    # object it cannot load with one line on stderr: the CLI would run dumpable.
    (tmp_path / name).mkdir()
    with _temporary_folder(tmp_path / name):  # what TMPDIR names
        assert _protected(Path(PYTHON), PYTHON, "-c", READ_FLAG) in (None, "0\n")


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a noexec tmpfs")
def test_a_noexec_temporary_folder_is_refused(tmp_path: Path) -> None:
    # The linker maps the object's code executable, which a noexec mount refuses.
    noexec = tmp_path / "noexec"
    noexec.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", "noexec", "tmpfs", str(noexec)]
    mounted = subprocess.run(mount, capture_output=True, check=False)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        with _temporary_folder(noexec):
            assert _protected(Path(PYTHON), PYTHON, "-c", READ_FLAG) in (None, "0\n")
    finally:
        subprocess.run(["umount", str(noexec)], check=True)


@pytest.mark.parametrize(
    ("machine", "e_machine", "relative"), [("x86_64", 62, 8), ("aarch64", 183, 1027)]
)
def test_each_machines_object_relocates_its_one_initialiser_to_its_code(
    machine: str, e_machine: int, relative: int
) -> None:
    image = nondumpable.shared_object(machine)
    assert image[:4] == b"\x7fELF"
    assert struct.unpack_from("<HH", image, 16) == (3, e_machine)  # ET_DYN
    # The one relocation: RELATIVE, at the initialiser array, to the first instruction.
    headers = [struct.unpack_from("<IIQQQQQQ", image, 64 + 56 * i) for i in range(4)]
    _, _, at, _, _, size, _, _ = next(h for h in headers if h[0] == 2)  # PT_DYNAMIC
    dynamic = dict(struct.unpack_from("<qQ", image, at + i) for i in range(0, size, 16))
    offset, kind, addend = struct.unpack_from("<QQq", image, dynamic[7])  # DT_RELA
    assert (kind, offset, dynamic[27]) == (relative, dynamic[25], 8)  # DT_INIT_ARRAY(SZ)
    first = {"x86_64": bytes.fromhex("bf04000000"), "aarch64": struct.pack("<I", 0xD2800080)}
    assert image[addend : addend + len(first[machine])] == first[machine]  # PR_SET_DUMPABLE


def test_another_machine_gets_no_object() -> None:
    with pytest.raises(nondumpable.UnsupportedMachine, match="'riscv64'"):
        nondumpable.shared_object("riscv64")
