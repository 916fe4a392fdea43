"""A package's kind is checked against its seam's Protocol when it loads.

A kind written for another version of a seam (a member renamed since: issue 37
renamed `host_stands_in` to `falls_back_to_host` and `vary` to `with_variation`)
would otherwise fail mid-run with an AttributeError traceback. The package here is
real: a module and its `.dist-info` with an entry point, found on `sys.path` by
`importlib.metadata` as an installed package is.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ci_evals.agents.registry import KINDS as AGENT_KINDS
from ci_evals.errors import UserError
from ci_evals.registry import Registry
from ci_evals.sandbox.base import SandboxKind
from ci_evals.sandbox.registry import KINDS as SANDBOX_KINDS

GROUP = "ci_evals_test.sandboxes"
KIND_SOURCE = """\
class Kind:
    name = "{name}"
    isolated = True
    {fallback} = True
    runs_images = False

    def load(self, value, suite_dir): ...
    def available(self): return None
    def prepare(self, options, environ, run_id): ...
    def image_options(self, image): ...
    def limits(self): ...
    def open(self, spec, options): ...

KIND = Kind()
"""


def install(site: Path, name: str, fallback: str) -> None:
    """A package `pkg_NAME` declaring sandbox kind NAME in GROUP, as pip lays it out."""
    (site / f"pkg_{name}.py").write_text(KIND_SOURCE.format(name=name, fallback=fallback))
    info = site / f"pkg_{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: pkg-{name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent(f"""\
            [{GROUP}]
            {name} = pkg_{name}:KIND
            """)
    )


def test_a_kind_lacking_a_member_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(tmp_path, "older", fallback="host_stands_in")
    install(tmp_path, "current", fallback="falls_back_to_host")
    monkeypatch.syspath_prepend(str(tmp_path))
    kinds: Registry[SandboxKind] = Registry("sandbox", GROUP, {}, protocol=SandboxKind)

    assert kinds.get("current").falls_back_to_host is True
    with pytest.raises(UserError) as refused:
        kinds.get("older")
    message = refused.value.message
    assert message.startswith("sandbox 'older' (package pkg-older 1.0, entry point older")
    assert message.endswith("lacks falls_back_to_host")
    assert "update or uninstall that package" in (refused.value.hint or "")


def test_the_seams_whose_members_were_renamed_check_them() -> None:
    # The registries themselves are built with their Protocol: a kind is checked
    # against the members these seams have today.
    assert "falls_back_to_host" in SANDBOX_KINDS._members
    assert "with_variation" in AGENT_KINDS._members
