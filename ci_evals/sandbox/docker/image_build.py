"""Build a sandbox image from a recipe (`recipe`) with no registry to pull from.

1. The root file system: `debootstrap --variant=minbase --include=PACKAGES`
   from the recipe's Debian mirror, trimmed (apt lists and caches, docs, man
   pages), a `sandbox` user (`SANDBOX_UID`) added, packed as a tarball kept in
   the cache folder (`rootfs/<key>.tar`), so a CI job bootstraps once.
2. The wheels: `pip download` on the host for the image's Python (version and
   glibc read from the new root file system), binary wheels only, cached by
   what they depend on (`wheels/<key>/`), plus pip's own wheel.
3. `docker import` of the tarball (tag `ci-evals/base:<key>`).
4. A build container from it (no network, labelled so `ci-evals gc` finds it
   after a crash): the recipe's files put in as a tar archive, the wheels
   installed by pip run from its wheel, then committed as `Recipe.tag` with
   the image's environment and working folder, and removed.

An image whose tag exists is not built again. Every step says on stderr what
it does and how long it took (a live timer on a terminal).
"""

from __future__ import annotations

import contextlib
import io
import os
import platform
import re
import shutil
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import IO, Any

from ci_evals import process
from ci_evals.errors import UserError
from ci_evals.sandbox.docker import engine
from ci_evals.sandbox.docker.recipe import Recipe, sha256
from ci_evals.text import one_line

DEBOOTSTRAP_TIMEOUT_S = 1800.0
PIP_TIMEOUT_S = 900.0
INSTALL_TIMEOUT_S = 900.0
WHEELS_INSIDE = "/ci-evals-wheels"
# Trimmed after debootstrap: nothing a sandboxed program needs, ~half the size.
_TRIM = (
    "var/cache/apt/archives",
    "var/lib/apt/lists",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
)
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def cache_dir(environ: Mapping[str, str]) -> Path:
    """`$CI_EVALS_CACHE`, else `$XDG_CACHE_HOME/ci-evals`, else `~/.cache/ci-evals`."""
    if environ.get("CI_EVALS_CACHE"):
        return Path(environ["CI_EVALS_CACHE"])
    base = environ.get("XDG_CACHE_HOME") or os.path.join(environ.get("HOME", "/root"), ".cache")
    return Path(base) / "ci-evals"


def image_exists(tag: str) -> bool:
    return engine.image_known(tag)


def ensure_image(recipe: Recipe, cache: Path, *, out: IO[str] | None = None) -> str:
    """The recipe's image tag, built first when the engine does not have it."""
    why = engine.available()
    if why is not None:
        raise UserError(why)
    tag = recipe.tag
    if image_exists(tag):
        return tag
    return build_image(recipe, cache, out=out)


def build_image(recipe: Recipe, cache: Path, *, out: IO[str] | None = None) -> str:
    """Build the recipe's image (see the module doc); returns its tag."""
    stream = sys.stderr if out is None else out
    tag = recipe.tag
    started = time.monotonic()
    print(f"building {tag} from {recipe.file}", file=stream, flush=True)
    rootfs = _rootfs(recipe, cache, stream)
    wheels = _wheels(recipe, cache, rootfs, stream) if recipe.wheels else None
    base = f"ci-evals/base:{recipe.rootfs_key[:16]}"
    with _step(stream, "import the root file system"):
        if not image_exists(base):
            repository, version = base.split(":")
            engine.client().api.import_image_from_file(str(rootfs), repository, version)
    with _step(stream, "install the wheels and files, commit"):
        _finish(recipe, base, wheels, tag)
    print(f"built {tag} in {time.monotonic() - started:.1f} s", file=stream, flush=True)
    return tag


# -- 1. the root file system ----------------------------------------------------------


def _rootfs(recipe: Recipe, cache: Path, stream: IO[str]) -> Path:
    tarball = cache / "rootfs" / f"{recipe.rootfs_key}.tar"
    if tarball.is_file():
        print(f"  root file system: cached ({tarball})", file=stream, flush=True)
        return tarball
    debootstrap = shutil.which("debootstrap") or (
        "/usr/sbin/debootstrap" if os.path.exists("/usr/sbin/debootstrap") else None
    )
    if debootstrap is None:
        raise UserError("debootstrap is not installed", hint="apt-get install debootstrap")
    if os.geteuid() != 0:
        raise UserError("debootstrap needs root", hint="build the image as root (sudo)")
    tarball.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ci-evals-rootfs-", dir=tarball.parent) as tmp:
        root = Path(tmp) / "root"
        argv = [debootstrap, "--variant=minbase"]
        if recipe.packages:
            argv.append(f"--include={','.join(recipe.packages)}")
        argv += [recipe.suite, str(root), recipe.mirror]
        what = f"debootstrap {recipe.suite} (minbase + {', '.join(recipe.packages) or 'nothing'})"
        with _step(stream, what):
            done = process.run(argv, timeout=DEBOOTSTRAP_TIMEOUT_S, output_cap=64 * 1024)
            if not done.ok:
                said = one_line(done.stderr.decode(errors="replace")[-400:] or "no output", 300)
                code = "timed out" if done.timed_out else f"exit {done.returncode}"
                raise UserError(f"debootstrap failed ({code}): {said}")
        with _step(stream, "trim and pack the root file system"):
            for relative in _TRIM:
                shutil.rmtree(root / relative, ignore_errors=True)
            _add_sandbox_user(root)
            partial = tarball.with_suffix(".partial")
            packed = process.run(
                ["tar", "-C", str(root), "--numeric-owner", "-cf", str(partial), "."],
                timeout=DEBOOTSTRAP_TIMEOUT_S,
                output_cap=16 * 1024,
            )
            if not packed.ok:
                raise UserError(f"tar failed: {one_line(packed.stderr.decode(errors='replace'))}")
            os.replace(partial, tarball)
            tarball.with_suffix(".facts").write_text(_facts(root))
    return tarball


def _add_sandbox_user(root: Path) -> None:
    """The user the sandbox runs as, so `id`, `whoami` and Python's getpass see a name."""
    uid = engine.SANDBOX_UID
    with (root / "etc/passwd").open("a") as passwd:
        passwd.write(f"sandbox:x:{uid}:{uid}:ci-evals sandbox:/workspace:/bin/sh\n")
    with (root / "etc/group").open("a") as group:
        group.write(f"sandbox:x:{uid}:\n")


def _facts(root: Path) -> str:
    """`python=3.11 glibc=2.36` of a root file system (what the wheels must fit)."""
    python = ""
    link = root / "usr/bin/python3"
    if link.is_symlink():
        found = re.fullmatch(r"python(\d+\.\d+)", os.readlink(link))
        python = found.group(1) if found else ""
    glibc = ""
    status = root / "var/lib/dpkg/status"
    if status.is_file():
        found = re.search(
            r"^Package: libc6\n(?:[^\n]+\n)*?Version: (\d+\.\d+)", status.read_text(), re.M
        )
        glibc = found.group(1) if found else ""
    return f"python={python} glibc={glibc}\n"


# -- 2. the wheels ------------------------------------------------------------------


def _wheels(recipe: Recipe, cache: Path, rootfs: Path, stream: IO[str]) -> Path:
    facts = dict(item.split("=", 1) for item in rootfs.with_suffix(".facts").read_text().split())
    python, glibc = facts.get("python", ""), facts.get("glibc", "")
    if not python or not glibc:
        raise UserError(f"the image has no python3 or glibc to fetch wheels for ({rootfs})")
    arch = platform.machine()
    key = sha256(repr((recipe.wheels, python, glibc, arch)).encode())
    folder = cache / "wheels" / key
    if (folder / ".complete").is_file():
        print(f"  wheels: cached ({folder})", file=stream, flush=True)
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    major, minor = (int(part) for part in glibc.split("."))
    platforms = [f"manylinux_{major}_{m}_{arch}" for m in range(17, minor + 1)]
    platforms += [f"manylinux2014_{arch}", "linux_" + arch, "any"]
    argv = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check"]
    argv += ["--only-binary=:all:", "--python-version", python, "--implementation", "cp"]
    for tag in platforms:
        argv += ["--platform", tag]
    argv += ["--dest", str(folder), "--", "pip", *recipe.wheels]
    with _step(stream, f"pip download {' '.join(recipe.wheels)} (Python {python})"):
        done = process.run(argv, timeout=PIP_TIMEOUT_S, output_cap=64 * 1024)
        if not done.ok:
            said = one_line(done.stderr.decode(errors="replace")[-600:] or "no output", 400)
            raise UserError(f"pip download failed: {said}", hint="binary wheels only")
    (folder / ".complete").write_text("")
    return folder


# -- 4. install and commit ------------------------------------------------------------


def _finish(recipe: Recipe, base: str, wheels: Path | None, tag: str) -> None:
    from docker.types import Mount  # noqa: PLC0415

    command = ["true"]
    mounts = []
    if wheels is not None:
        pip = sorted(wheels.glob("pip-*.whl"))
        if not pip:
            raise UserError(f"no pip wheel in {wheels}", hint="remove the folder and build again")
        command = [
            "python3",
            f"{WHEELS_INSIDE}/{pip[-1].name}/pip",
            "install",
            "--quiet",
            "--no-index",
            "--no-cache-dir",
            # Bytecode compiled now (pip's default): the root is read-only when
            # it runs, so each start would compile every imported module anew
            # (seconds for `mcp` and pydantic on one CPU).
            "--disable-pip-version-check",
            "--root-user-action=ignore",
            "--break-system-packages",  # the image's own Python is ours to fill
            "--find-links",
            WHEELS_INSIDE,
            "--",
            *recipe.wheels,
        ]
        mounts.append(Mount(WHEELS_INSIDE, str(wheels), type="bind", read_only=True))
    container: Any = engine.client().containers.create(
        base,
        command=command,
        network_mode="none",
        mounts=mounts,
        labels={engine.LABEL: "1", engine.LABEL_OWNER: engine.owner_label()},
        environment={"PATH": _PATH},
    )
    try:
        for source, destination in recipe.files:
            _put_tree(container, source, destination)
        container.start()
        code = int(container.wait(timeout=INSTALL_TIMEOUT_S).get("StatusCode", 1))
        if code != 0:
            said = container.logs(tail=20).decode(errors="replace")
            raise UserError(
                f"installing into the image failed (exit {code}): {one_line(said, 400)}"
            )
        env = [f"{key}={value}" for key, value in (("PATH", _PATH), *recipe.env)]
        repository, version = tag.split(":")
        replaced = _image_id(tag)  # a rebuild (--force) of the same tag
        container.commit(
            repository=repository,
            tag=version,
            conf={
                "Env": env,
                "WorkingDir": engine.WORKSPACE,
                "User": str(engine.SANDBOX_UID),
                "Cmd": ["sleep", "infinity"],
                # The engine merges the build container's labels into the image,
                # and every container made from it would inherit them: `ci-evals
                # gc` would take a stranger's `docker run` of it for a dead
                # ci-evals' leftover. Blanked here (a label cannot be dropped).
                "Labels": {
                    engine.LABEL: "",
                    engine.LABEL_OWNER: "",
                    engine.LABEL + ".recipe": recipe.name,
                },
            },
        )
    finally:
        with contextlib.suppress(Exception):
            container.remove(force=True, v=True)
    if replaced is not None and replaced != _image_id(tag):
        with contextlib.suppress(Exception):  # still used by a container: left to the engine
            engine.client().images.remove(replaced)


def _image_id(tag: str) -> str | None:
    from docker.errors import ImageNotFound  # noqa: PLC0415

    try:
        return str(engine.client().images.get(tag).id)
    except ImageNotFound:
        return None


def _put_tree(container: Any, source: Path, destination: PurePosixPath) -> None:
    """Copy a file (to the path `destination`) or a folder (its tree at `destination`)
    from beside the recipe into the image, owned by root, links kept as links; the
    engine makes missing parent folders."""

    def root_owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        if info.isdir():
            info.mode = 0o755
        return info

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(source, arcname=str(destination).lstrip("/"), filter=root_owned)
    if not container.put_archive("/", buffer.getvalue()):
        raise UserError(f"the engine refused to copy {source} into the image")


@contextlib.contextmanager
def _step(stream: IO[str], what: str) -> Iterator[None]:
    """`  what ... 12.3 s` on `stream`; on a terminal, a timer counting meanwhile."""
    start = time.monotonic()
    live = stream.isatty()
    stop = threading.Event()
    ticker = None
    if live:

        def tick() -> None:
            while not stop.wait(1.0):
                print(f"\r  {what} ... {time.monotonic() - start:.0f} s", end="", file=stream)
                stream.flush()

        print(f"  {what} ...", end="", file=stream, flush=True)
        ticker = threading.Thread(target=tick, daemon=True)
        ticker.start()
    else:
        print(f"  {what} ...", file=stream, flush=True)
    try:
        yield
    finally:
        stop.set()
        if ticker is not None:
            ticker.join()
        prefix = f"\r  {what} ... " if live else f"  {what}: "
        print(f"{prefix}{time.monotonic() - start:.1f} s", file=stream, flush=True)
