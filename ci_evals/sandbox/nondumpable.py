"""A shared object that makes the process it is preloaded into non-dumpable, written
from Python: no compiler, no binary in the repository.

Why: the Claude CLI and the commands its Bash tool starts share a uid inside the
sandbox, so any of them could rewrite the CLI's memory through `/proc/<cli>/mem`,
a path no seccomp filter sees. `prctl(PR_SET_DUMPABLE, 0)` inside the CLI closes
it, and every execve resets the flag: hence an `LD_PRELOAD` object whose
initialiser makes the call, fails closed (`exit_group(127)`) if the flag stays
set, and takes `LD_PRELOAD` out of the environment so what the CLI starts does
not load it. `loads_preload` and `preloaded` tell the caller when a CLI would
ignore the object or pass it on, or a linker would skip it.

The object (`shared_object`) is the smallest ELF glibc's and musl's linkers load:
two PT_LOAD segments (code read-execute; the initialiser array, one pointer slot
and the dynamic section read-write), PT_DYNAMIC, PT_GNU_STACK, a symbol table
naming only `environ`, a RELATIVE relocation pointing `DT_INIT_ARRAY`'s entry at
the code and a GLOB_DAT one filling the slot with `&environ`; the code needs no
libc. How it is used and tested: docs/isolation.md (*What the agent can still do*).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import struct
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ci_evals import process

FILE_NAME = "ci-evals-nondumpable.so"
# Sets a program's LD_PRELOAD and execs it (the Claude CLI's, in every sandbox).
ENV_PROGRAM = "/usr/bin/env"
_PROBE_TIMEOUT_S = 30.0
# The line the object writes before it ends a process it could not protect.
REFUSAL = b"ci-evals: could not make the Claude CLI non-dumpable (prctl); it does not run\n"
EXIT_STATUS = 127

_PR_SET_DUMPABLE = 4
_PR_GET_DUMPABLE = 3
_SEGMENT_GAP = 0x10000  # the read-write segment's distance: a multiple of any page size

# e_machine, R_*_RELATIVE, R_*_GLOB_DAT
_MACHINES = {"x86_64": (62, 8, 6), "aarch64": (183, 1027, 1025)}
# What the initialiser takes out of the environment (NUL-terminated for its loop).
_PATTERN = b"LD_PRELOAD=\0"
_STB_GLOBAL_OBJECT = 0x11  # st_info: STB_GLOBAL << 4 | STT_OBJECT

# ELF constants
_ET_DYN = 3
_PT_LOAD, _PT_DYNAMIC, _PT_GNU_STACK = 1, 2, 0x6474E551
_PF_X, _PF_W, _PF_R = 1, 2, 4
_DT_NULL, _DT_HASH, _DT_STRTAB, _DT_SYMTAB = 0, 4, 5, 6
_DT_RELA, _DT_RELASZ, _DT_RELAENT, _DT_STRSZ, _DT_SYMENT = 7, 8, 9, 10, 11
_DT_INIT_ARRAY, _DT_INIT_ARRAYSZ = 25, 27

_EHDR_SIZE, _PHDR_SIZE, _PHDR_COUNT = 64, 56, 4
_SYM_SIZE, _RELA_SIZE = 24, 24


class UnsupportedMachine(RuntimeError):
    """No object for this machine (the seccomp filter refuses the same machines)."""


# What the code needs to know of the layout: where the refusal message, the
# "LD_PRELOAD=" pattern and the slot the linker fills with `&environ` are, and
# where the code itself starts (x86_64 and aarch64 address them relative to it).
@dataclass(frozen=True)
class _Addresses:
    code: int
    message: int
    pattern: int
    slot: int


class _Code:
    """A few dozen instructions with labels: fixed-size encodings, so one pass
    measures and a second emits; jumps and PC-relative operands resolve at the end."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.parts: list[bytes | Callable[[int, dict[str, int]], bytes]] = []
        self.labels: dict[str, int] = {}
        self.size = 0

    def emit(self, data: bytes | Callable[[int, dict[str, int]], bytes], size: int = 0) -> None:
        self.parts.append(data)
        self.size += len(data) if isinstance(data, bytes) else size

    def label(self, name: str) -> None:
        self.labels[name] = self.at + self.size

    def bytes(self) -> bytes:
        out = b""
        for part in self.parts:
            out += part if isinstance(part, bytes) else part(self.at + len(out), self.labels)
        return out


def _x86_64(layout: _Addresses) -> bytes:
    """The initialiser for x86_64 (System V: rdi, rsi, rdx, r10, r8; syscall in rax;
    rax, rcx, rdx, rsi, rdi, r8, r10, r11 are the caller's to lose)."""
    code = _Code(layout.code)
    hexa = bytes.fromhex

    def jump(opcode: str, target: str) -> None:  # a short jump to a label
        code.emit(lambda pc, labels: hexa(opcode) + struct.pack("<b", labels[target] - (pc + 2)), 2)

    def rip(prefix: str, target: int) -> None:  # an instruction with a [rip + rel32] operand
        size = len(hexa(prefix)) + 4
        code.emit(lambda pc, _: hexa(prefix) + struct.pack("<i", target - (pc + size)), size)

    # prctl(PR_SET_DUMPABLE, 0), then the flag read back: 0, or refuse.
    code.emit(hexa("bf04000000 31f6 31d2 4d31d2 4d31c0 b89d000000 0f05"))
    code.emit(hexa("bf03000000 b89d000000 0f05 85c0"))  # prctl(PR_GET_DUMPABLE); test eax
    jump("75", "refuse")  # jnz
    # Take LD_PRELOAD out of the environment: the CLI's children (its tools,
    # hooks, MCP servers) must run as they would without us.
    rip("488b05", layout.slot)  # mov rax, [slot] (&environ)
    code.emit(hexa("488b00 4885c0"))  # mov rax, [rax]; test rax, rax
    jump("74", "done")  # jz
    code.label("entry")
    code.emit(hexa("488b10 4885d2"))  # mov rdx, [rax]; test rdx, rdx
    jump("74", "done")  # jz: the end of the environment
    rip("488d35", layout.pattern)  # lea rsi, [pattern]
    code.emit(hexa("31c9"))  # xor ecx, ecx
    code.label("compare")
    code.emit(hexa("448a040e 4584c0"))  # mov r8b, [rsi + rcx]; test r8b, r8b
    jump("74", "match")  # jz: the whole pattern matched
    code.emit(hexa("443a040a"))  # cmp r8b, [rdx + rcx]
    jump("75", "next")  # jne
    code.emit(hexa("48ffc1"))  # inc rcx
    jump("eb", "compare")
    code.label("next")
    code.emit(hexa("4883c008"))  # add rax, 8
    jump("eb", "entry")
    code.label("match")  # move every later entry, the final NULL too, one slot down
    code.emit(hexa("4889c1"))  # mov rcx, rax
    code.label("shift")
    code.emit(hexa("488b5108 488911 4883c108 4885d2"))  # rdx = [rcx+8]; [rcx] = rdx; rcx += 8
    jump("75", "shift")  # jnz
    jump("eb", "entry")  # the same slot again: it holds the next entry now
    code.label("done")
    code.emit(hexa("c3"))  # ret
    code.label("refuse")  # write(2, message, len); exit_group(127)
    code.emit(hexa("bf02000000"))
    rip("488d35", layout.message)
    code.emit(hexa("ba") + struct.pack("<I", len(REFUSAL)) + hexa("b801000000 0f05"))
    code.emit(hexa("bf") + struct.pack("<I", EXIT_STATUS) + hexa("b8e7000000 0f05"))
    return code.bytes()


def _movz(register: int, value: int) -> int:
    return 0xD2800000 | (value << 5) | register  # movz xN, #value


def _aarch64(layout: _Addresses) -> bytes:
    """The initialiser for aarch64 (x0..x5 arguments, the call number in x8, svc #0;
    x0..x17 are the caller's to lose)."""
    code = _Code(layout.code)
    prctl, write, exit_group, svc = 167, 64, 94, 0xD4000001

    def word(value: int) -> None:
        code.emit(struct.pack("<I", value))

    def branch(base: int, target: str, bits: int, shift: int) -> None:  # to a label
        mask = (1 << bits) - 1

        def encode(pc: int, labels: dict[str, int]) -> bytes:
            return struct.pack("<I", base | ((((labels[target] - pc) >> 2) & mask) << shift))

        code.emit(encode, 4)

    def to(base: int, target: int) -> None:  # ldr (literal) or adr to an address
        def encode(pc: int, _: dict[str, int]) -> bytes:
            offset = target - pc
            low = (offset & 3) << 29 if base & _ADR_MASK == _ADR else 0  # adr: byte offset
            return struct.pack("<I", base | low | (((offset >> 2) & 0x7FFFF) << 5))

        code.emit(encode, 4)

    for value in (
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
    ):
        word(value)
    branch(0xB5000000, "refuse", 19, 5)  # cbnz x0, refuse
    to(_LDR_X0_LITERAL, layout.slot)  # ldr x0, slot (&environ)
    word(0xF9400000)  # ldr x0, [x0]
    branch(0xB4000000, "done", 19, 5)  # cbz x0, done
    code.label("entry")
    word(0xF9400002)  # ldr x2, [x0]
    branch(0xB4000002, "done", 19, 5)  # cbz x2, done: the end of the environment
    to(_ADR | 1, layout.pattern)  # adr x1, pattern
    word(_movz(3, 0))  # x3 = 0
    code.label("compare")
    word(0x38636824)  # ldrb w4, [x1, x3]
    branch(0x34000004, "match", 19, 5)  # cbz w4, match: the whole pattern matched
    word(0x38636845)  # ldrb w5, [x2, x3]
    word(0x6B05009F)  # cmp w4, w5
    branch(0x54000001, "next", 19, 5)  # b.ne next
    word(0x91000463)  # add x3, x3, #1
    branch(0x14000000, "compare", 26, 0)  # b compare
    code.label("next")
    word(0x91002000)  # add x0, x0, #8
    branch(0x14000000, "entry", 26, 0)  # b entry
    code.label("match")  # move every later entry, the final NULL too, one slot down
    word(0xAA0003E6)  # mov x6, x0
    code.label("shift")
    word(0xF94004C7)  # ldr x7, [x6, #8]
    word(0xF90000C7)  # str x7, [x6]
    word(0x910020C6)  # add x6, x6, #8
    branch(0xB5000007, "shift", 19, 5)  # cbnz x7, shift
    branch(0x14000000, "entry", 26, 0)  # b entry: the same slot holds the next entry now
    code.label("done")
    word(0xD65F03C0)  # ret
    code.label("refuse")  # write(2, message, len); exit_group(127)
    word(_movz(0, 2))
    to(_ADR | 1, layout.message)  # adr x1, message
    for value in (
        _movz(2, len(REFUSAL)),
        _movz(8, write),
        svc,
        _movz(0, EXIT_STATUS),
        _movz(8, exit_group),
        svc,
    ):
        word(value)
    return code.bytes()


_ADR, _ADR_MASK = 0x10000000, 0x9F000000
_LDR_X0_LITERAL = 0x58000000


def _align(value: int, to: int) -> int:
    return -(-value // to) * to


def shared_object(machine: str) -> bytes:
    """The object for `machine` (`os.uname().machine`): x86_64 or aarch64."""
    if machine not in _MACHINES:
        raise UnsupportedMachine(
            f"no non-dumpable preload object for this machine ({machine!r}; known: "
            f"{', '.join(_MACHINES)})"
        )
    e_machine, relative, glob_dat = _MACHINES[machine]
    build = _x86_64 if machine == "x86_64" else _aarch64

    # The read-execute segment (file offset = address): headers, hash, symbols,
    # strings, relocations, message, pattern, code.
    hash_at = _EHDR_SIZE + _PHDR_SIZE * _PHDR_COUNT
    hash_table = struct.pack("<5I", 1, 2, 0, 0, 0)  # one bucket, two chains, all empty
    symtab_at = _align(hash_at + len(hash_table), 8)
    strtab = b"\0environ\0"
    # the null symbol, then `environ`: global, undefined (the C library defines it)
    symtab = bytes(_SYM_SIZE) + struct.pack("<IBBHQQ", 1, _STB_GLOBAL_OBJECT, 0, 0, 0, 0)
    strtab_at = symtab_at + len(symtab)
    rela_at = _align(strtab_at + len(strtab), 8)
    message_at = rela_at + 2 * _RELA_SIZE
    pattern_at = message_at + len(REFUSAL)
    code_at = _align(pattern_at + len(_PATTERN), 16)
    # The code's size does not depend on the addresses: measure, then lay out.
    text_end = code_at + len(build(_Addresses(code_at, 0, 0, code_at)))

    # The read-write segment, later in the file, mapped _SEGMENT_GAP further on:
    # the initialiser array and the slot for &environ (both written by the
    # linker), and the dynamic section (which older glibc writes into).
    data_at = _align(text_end, 16)
    init_array_at = data_at
    slot_at = init_array_at + 8
    dynamic_at = slot_at + 8
    code = build(_Addresses(code_at, message_at, pattern_at, slot_at + _SEGMENT_GAP))
    assert code_at + len(code) == text_end
    dynamic = [
        (_DT_HASH, hash_at),
        (_DT_STRTAB, strtab_at),
        (_DT_SYMTAB, symtab_at),
        (_DT_STRSZ, len(strtab)),
        (_DT_SYMENT, _SYM_SIZE),
        (_DT_RELA, rela_at),
        (_DT_RELASZ, 2 * _RELA_SIZE),
        (_DT_RELAENT, _RELA_SIZE),
        (_DT_INIT_ARRAY, init_array_at + _SEGMENT_GAP),
        (_DT_INIT_ARRAYSZ, 8),
        (_DT_NULL, 0),
    ]
    dynamic_bytes = b"".join(struct.pack("<qQ", tag, value) for tag, value in dynamic)
    data_end = dynamic_at + len(dynamic_bytes)
    rela = struct.pack("<QQq", init_array_at + _SEGMENT_GAP, relative, code_at)
    rela += struct.pack("<QQq", slot_at + _SEGMENT_GAP, (1 << 32) | glob_dat, 0)  # symbol 1

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

    def header_of(kind: int, flags: int, offset: int, size: int, *, gap: int, align: int) -> bytes:
        """One program header: `size` bytes at file `offset`, mapped `gap` further on."""
        address = offset + gap
        return struct.pack("<IIQQQQQQ", kind, flags, offset, address, address, size, size, align)

    program_headers = b"".join(
        (
            header_of(_PT_LOAD, _PF_R | _PF_X, 0, text_end, gap=0, align=_SEGMENT_GAP),
            header_of(
                _PT_LOAD, _PF_R | _PF_W, data_at, data_end - data_at,
                gap=_SEGMENT_GAP, align=_SEGMENT_GAP,
            ),
            header_of(
                _PT_DYNAMIC, _PF_R | _PF_W, dynamic_at, len(dynamic_bytes),
                gap=_SEGMENT_GAP, align=8,
            ),
            header_of(_PT_GNU_STACK, _PF_R | _PF_W, 0, 0, gap=0, align=16),
        )
    )  # fmt: skip
    image = bytearray(data_end)
    for at, part in (
        (0, header),
        (_EHDR_SIZE, program_headers),
        (hash_at, hash_table),
        (symtab_at, symtab),
        (strtab_at, strtab),
        (rela_at, rela),
        (message_at, REFUSAL),
        (pattern_at, _PATTERN),
        (code_at, code),
        (dynamic_at, dynamic_bytes),
    ):
        image[at : at + len(part)] = part
    return bytes(image)


def preloading(preload: Path, argv: Sequence[str]) -> list[str]:
    """`argv` started with the object preloaded, in it alone: `env` sets LD_PRELOAD
    for the exec of `argv[0]`, not for whatever starts `env`."""
    return [ENV_PROGRAM, f"LD_PRELOAD={preload}", *argv]


def write(folder: Path, machine: str) -> Path:
    """Write the object for `machine` into `folder` (read-only) and return its path."""
    path = folder / FILE_NAME
    path.write_bytes(shared_object(machine))
    path.chmod(0o444)
    return path


def loads_preload(program: Path) -> bool:
    """Whether `program` itself loads what LD_PRELOAD names: a dynamically linked
    ELF (it names an interpreter). A static ELF ignores LD_PRELOAD without a word;
    a script's interpreter loads the object and takes LD_PRELOAD out, so what it
    starts (`#!/usr/bin/env node`'s node, a shell wrapper's program) runs dumpable."""
    with program.open("rb") as file:
        head = file.read(64)
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
        what = (
            "a script's interpreter takes LD_PRELOAD for itself (what it starts runs without)"
            if _is_script(program)
            else "a statically linked program ignores LD_PRELOAD"
        )
        raise NotProtectable(
            f"{program}: {what}, so the agent's commands could write its memory "
            "(/proc/<pid>/mem); install the claude-agent-sdk whose bundled CLI is "
            "dynamically linked, or name one with cli_path"
        )
    folder = Path(tempfile.mkdtemp(prefix="ci-evals-preload-"))
    try:
        folder.chmod(0o755)
        path = write(folder, os.uname().machine)
        _check_loaded(path)
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _is_script(program: Path) -> bool:
    with program.open("rb") as file:
        return file.read(2) == b"#!"


def _check_loaded(path: Path) -> None:
    """Refuse (NotProtectable) an object the dynamic linker skips: `env` started with
    it, as the CLI is, prints an empty environment only if its initialiser ran."""
    argv = [ENV_PROGRAM, "-i", f"LD_PRELOAD={path}", ENV_PROGRAM]
    try:
        done = process.run(argv, timeout=_PROBE_TIMEOUT_S)
    except OSError as exc:
        ran, said = False, str(exc)
    else:
        ran = done.returncode == 0 and done.stdout == b""
        said = done.stderr.decode(errors="replace").strip()
        if done.timed_out:  # worded as Python's TimeoutExpired says it
            said = f"Command '{argv}' timed out after {_PROBE_TIMEOUT_S} seconds"
    if not ran:
        raise NotProtectable(
            f"{path}: the dynamic linker does not load it from here, so the Claude CLI "
            f"would run dumpable ({said.splitlines()[0] if said else 'no message'}); "
            "point TMPDIR at a folder whose path has no space or colon, on a mount "
            "that allows executing"
        )
