"""A shared object that makes the process it is preloaded into non-dumpable, written
from Python: no compiler, no binary in the repository.

Why: the Claude CLI and the commands its Bash tool starts share a uid inside the
sandbox, so the kernel lets any of them open `/proc/<cli>/mem` read-write and
rewrite the CLI's memory (a forged trajectory or result frame) — a path, which
no seccomp filter can see. The one check left is the kernel's *dumpable* flag:
`prctl(PR_SET_DUMPABLE, 0)` in the CLI itself turns its `/proc/<pid>/*` root's
and makes `open("/proc/<cli>/mem")` fail with EACCES for every process without
`CAP_SYS_PTRACE` (none inside `bwrap`: its capabilities are dropped). Every
execve resets the flag, so it must be set inside the CLI, after its exec: an
`LD_PRELOAD` object whose initialiser makes that call, before the CLI's own code
runs and long before it starts a tool.

The object (`shared_object`) is the smallest ELF the dynamic linkers (glibc's,
musl's) load: two PT_LOAD segments (code read-execute, the dynamic section and
the initialiser array read-write), PT_DYNAMIC, PT_GNU_STACK (no executable
stack), an empty symbol table, and one R_*_RELATIVE relocation that points
`DT_INIT_ARRAY`'s one entry at the code. The code needs no libc: it calls
`prctl(PR_SET_DUMPABLE, 0)`, reads the flag back with `PR_GET_DUMPABLE`, and if
it is not 0 writes one line to stderr and ends the process (`exit_group(127)`):
fail closed, the CLI never runs dumpable with the object loaded. A CLI that is
a static ELF would ignore LD_PRELOAD silently; `loads_preload` tells the caller.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path

FILE_NAME = "ci-evals-nondumpable.so"
# The line the object writes before it ends a process it could not protect.
REFUSAL = b"ci-evals: could not make the Claude CLI non-dumpable (prctl); it does not run\n"
EXIT_STATUS = 127

_PR_SET_DUMPABLE = 4
_PR_GET_DUMPABLE = 3
_SEGMENT_GAP = 0x10000  # the read-write segment's distance: a multiple of any page size

# e_machine, R_*_RELATIVE
_MACHINES = {"x86_64": (62, 8), "aarch64": (183, 1027)}

# ELF constants
_ET_DYN = 3
_PT_LOAD, _PT_DYNAMIC, _PT_GNU_STACK = 1, 2, 0x6474E551
_PF_X, _PF_W, _PF_R = 1, 2, 4
_DT_NULL, _DT_HASH, _DT_STRTAB, _DT_SYMTAB = 0, 4, 5, 6
_DT_RELA, _DT_RELASZ, _DT_RELAENT, _DT_STRSZ, _DT_SYMENT = 7, 8, 9, 10, 11
_DT_INIT_ARRAY, _DT_INIT_ARRAYSZ = 25, 27

_EHDR_SIZE, _PHDR_SIZE, _PHDR_COUNT = 64, 56, 4
_SYM_SIZE, _RELA_SIZE, _DYN_SIZE = 24, 24, 16


class UnsupportedMachine(RuntimeError):
    """No object for this machine (the seccomp filter refuses the same machines)."""


def _x86_64(message_at: int, code_at: int) -> bytes:
    """The initialiser for x86_64 (System V: rdi, rsi, rdx, r10, r8; syscall in rax)."""
    head = bytes.fromhex(
        "bf04000000"  # mov edi, PR_SET_DUMPABLE
        "31f6"  # xor esi, esi (0: not dumpable)
        "31d2"  # xor edx, edx
        "4d31d2"  # xor r10, r10
        "4d31c0"  # xor r8, r8
        "b89d000000"  # mov eax, 157 (prctl)
        "0f05"  # syscall
        "bf03000000"  # mov edi, PR_GET_DUMPABLE
        "b89d000000"  # mov eax, 157 (prctl)
        "0f05"  # syscall
        "85c0"  # test eax, eax
        "7501"  # jnz refuse (over the ret)
        "c3"  # ret
        "bf02000000"  # refuse: mov edi, 2 (stderr)
    )
    lea_end = code_at + len(head) + 7  # rip after `lea rsi, [rip + rel32]` (7 bytes)
    lea = bytes.fromhex("488d35") + struct.pack("<i", message_at - lea_end)
    tail = (
        bytes.fromhex("ba")  # mov edx, len
        + struct.pack("<I", len(REFUSAL))
        + bytes.fromhex(
            "b801000000"  # mov eax, 1 (write)
            "0f05"  # syscall
        )
        + bytes.fromhex("bf")  # mov edi, status
        + struct.pack("<I", EXIT_STATUS)
        + bytes.fromhex(
            "b8e7000000"  # mov eax, 231 (exit_group)
            "0f05"  # syscall
        )
    )
    return head + lea + tail


def _movz(register: int, value: int) -> int:
    return 0xD2800000 | (value << 5) | register  # movz xN, #value


def _aarch64(message_at: int, code_at: int) -> bytes:
    """The initialiser for aarch64 (x0..x5 arguments, the call number in x8, svc #0)."""
    prctl, write, exit_group, svc, ret = 167, 64, 94, 0xD4000001, 0xD65F03C0
    words = [
        _movz(0, _PR_SET_DUMPABLE),
        _movz(1, 0),
        _movz(2, 0),
        _movz(3, 0),
        _movz(4, 0),
        _movz(8, prctl),
        svc,
        _movz(0, _PR_GET_DUMPABLE),
        _movz(8, prctl),
        svc,
        0xB5000040,  # cbnz x0, #+8 (over the ret)
        ret,
        _movz(0, 2),  # refuse: stderr
    ]
    offset = message_at - (code_at + 4 * len(words))  # adr x1, message
    words.append(0x10000001 | ((offset & 3) << 29) | (((offset >> 2) & 0x7FFFF) << 5))
    words += [
        _movz(2, len(REFUSAL)),
        _movz(8, write),
        svc,
        _movz(0, EXIT_STATUS),
        _movz(8, exit_group),
        svc,
    ]
    return struct.pack(f"<{len(words)}I", *words)


def _align(value: int, to: int) -> int:
    return -(-value // to) * to


def shared_object(machine: str) -> bytes:
    """The object for `machine` (`os.uname().machine`): x86_64 or aarch64."""
    if machine not in _MACHINES:
        raise UnsupportedMachine(
            f"no non-dumpable preload object for this machine ({machine!r}; known: "
            f"{', '.join(_MACHINES)})"
        )
    e_machine, relative = _MACHINES[machine]
    build = _x86_64 if machine == "x86_64" else _aarch64

    # The read-execute segment (file offset = address): headers, hash, symbols,
    # strings, relocation, message, code.
    hash_at = _EHDR_SIZE + _PHDR_SIZE * _PHDR_COUNT
    hash_table = struct.pack("<4I", 1, 1, 0, 0)  # one bucket, one chain, both empty
    symtab_at = hash_at + len(hash_table)
    symtab = bytes(_SYM_SIZE)  # the null symbol alone
    strtab_at = symtab_at + len(symtab)
    strtab = b"\0"
    rela_at = _align(strtab_at + len(strtab), 8)
    message_at = rela_at + _RELA_SIZE
    code_at = _align(message_at + len(REFUSAL), 16)
    code = build(message_at, code_at)
    text_end = code_at + len(code)

    # The read-write segment, later in the file, mapped _SEGMENT_GAP further on:
    # the initialiser array (relocated by the linker) and the dynamic section
    # (which older glibc writes into).
    data_at = _align(text_end, 16)
    init_array_at = data_at
    dynamic_at = init_array_at + 8
    dynamic = [
        (_DT_HASH, hash_at),
        (_DT_STRTAB, strtab_at),
        (_DT_SYMTAB, symtab_at),
        (_DT_STRSZ, len(strtab)),
        (_DT_SYMENT, _SYM_SIZE),
        (_DT_RELA, rela_at),
        (_DT_RELASZ, _RELA_SIZE),
        (_DT_RELAENT, _RELA_SIZE),
        (_DT_INIT_ARRAY, init_array_at + _SEGMENT_GAP),
        (_DT_INIT_ARRAYSZ, 8),
        (_DT_NULL, 0),
    ]
    dynamic_bytes = b"".join(struct.pack("<qQ", tag, value) for tag, value in dynamic)
    data_end = dynamic_at + len(dynamic_bytes)
    rela = struct.pack("<QQq", init_array_at + _SEGMENT_GAP, relative, code_at)

    header = struct.pack(
        "<4s5B7xHHIQQQIHHHHHH",
        b"\x7fELF",
        2,  # ELFCLASS64
        1,  # little-endian
        1,  # EV_CURRENT
        0,  # System V ABI
        0,  # ABI version
        _ET_DYN,
        e_machine,
        1,  # EV_CURRENT
        0,  # no entry point
        _EHDR_SIZE,  # program headers right after
        0,  # no section headers
        0,  # flags
        _EHDR_SIZE,
        _PHDR_SIZE,
        _PHDR_COUNT,
        0,  # section header entry size
        0,  # section headers
        0,  # section name table index
    )

    def load(flags: int, offset: int, size: int, gap: int) -> bytes:
        return struct.pack(
            "<IIQQQQQQ",
            _PT_LOAD,
            flags,
            offset,
            offset + gap,
            offset + gap,
            size,
            size,
            _SEGMENT_GAP,
        )

    program_headers = b"".join(
        (
            load(_PF_R | _PF_X, 0, text_end, 0),
            load(_PF_R | _PF_W, data_at, data_end - data_at, _SEGMENT_GAP),
            struct.pack(
                "<IIQQQQQQ",
                _PT_DYNAMIC,
                _PF_R | _PF_W,
                dynamic_at,
                dynamic_at + _SEGMENT_GAP,
                dynamic_at + _SEGMENT_GAP,
                len(dynamic_bytes),
                len(dynamic_bytes),
                8,
            ),
            struct.pack("<IIQQQQQQ", _PT_GNU_STACK, _PF_R | _PF_W, 0, 0, 0, 0, 0, 16),
        )
    )
    image = bytearray(data_end)
    for at, part in (
        (0, header),
        (_EHDR_SIZE, program_headers),
        (hash_at, hash_table),
        (symtab_at, symtab),
        (strtab_at, strtab),
        (rela_at, rela),
        (message_at, REFUSAL),
        (code_at, code),
        (dynamic_at, dynamic_bytes),
    ):
        image[at : at + len(part)] = part
    return bytes(image)


def write(folder: Path, machine: str) -> Path:
    """Write the object for `machine` into `folder` (read-only) and return its path."""
    path = folder / FILE_NAME
    path.write_bytes(shared_object(machine))
    path.chmod(0o444)
    return path


def loads_preload(program: Path) -> bool:
    """Whether `program` honours LD_PRELOAD: a dynamically linked ELF (it names an
    interpreter) or a script (its interpreter is a program of the system's). A
    static ELF ignores LD_PRELOAD without a word."""
    with program.open("rb") as file:
        head = file.read(64)
        if head.startswith(b"#!"):
            return True
        if not head.startswith(b"\x7fELF") or head[4] != 2:  # ELFCLASS64
            return False
        (phoff,) = struct.unpack_from("<Q", head, 32)
        phentsize, phnum = struct.unpack_from("<HH", head, 54)
        file.seek(phoff)
        table = file.read(phentsize * phnum)
    pt_interp = 3
    return any(
        struct.unpack_from("<I", table, index * phentsize)[0] == pt_interp for index in range(phnum)
    )


class NotProtectable(RuntimeError):
    """The program would run dumpable whatever is preloaded (a static ELF)."""


@contextlib.contextmanager
def preloaded(program: Path) -> Iterator[Path]:
    """A fresh folder (0755: the object is no secret, and a sandbox's uid must read it)
    holding the object for this machine; yields the object's path, for LD_PRELOAD and
    a read-only mount of its folder. Refuses (NotProtectable) a program that would
    ignore it, naming the program."""
    if not loads_preload(program):
        raise NotProtectable(
            f"{program}: a statically linked program ignores LD_PRELOAD, so the agent's "
            "commands could write its memory (/proc/<pid>/mem); install the claude-agent-sdk "
            "whose bundled CLI is dynamically linked, or name one with cli_path"
        )
    folder = Path(tempfile.mkdtemp(prefix="ci-evals-preload-"))
    try:
        folder.chmod(0o755)
        yield write(folder, os.uname().machine)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
