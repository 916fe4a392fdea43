"""`.ci/release.py`'s metadata check, on release files made here: what an index page
needs is there (fields, project URLs, classifiers, PYPI.md as Markdown), and each
gap is named. The whole release check (a real build) runs in .ci/run."""

from __future__ import annotations

import importlib.util
import io
import tarfile
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

from tests.paths import REPO

DESCRIPTION = (REPO / "PYPI.md").read_text(encoding="utf-8")
HEADERS = {
    "Metadata-Version": "2.4",
    "Name": "ci-evals",
    "Version": "0.1.0",
    "Summary": "Evaluate phased AI agents in CI.",
    "License-Expression": "MIT AND Apache-2.0",
    "Requires-Python": ">=3.10",
    "Description-Content-Type": "text/markdown",
}
URLS = ["Homepage", "Documentation", "Source", "Issues", "Changelog"]


@pytest.fixture(scope="module")
def release() -> ModuleType:
    spec = importlib.util.spec_from_file_location("release", REPO / ".ci" / "release.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def metadata(
    drop: tuple[str, ...] = (), urls: list[str] = URLS, body: str = DESCRIPTION, **fields: str
) -> str:
    headers = {k: v for k, v in (HEADERS | fields).items() if k not in drop}
    lines = [f"{k}: {v}" for k, v in headers.items()]
    lines += [f"Project-URL: {u}, https://example.invalid/{u.lower()}" for u in urls]
    lines += ["Classifier: Typing :: Typed"] if "Classifier" not in drop else []
    return "\n".join(lines) + "\n\n" + body


def release_files(tmp_path: Path, wheel_meta: str, sdist_meta: str) -> tuple[Path, Path]:
    wheel, sdist = tmp_path / "ci_evals-0.1.0-py3-none-any.whl", tmp_path / "ci_evals-0.1.0.tar.gz"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("ci_evals-0.1.0.dist-info/METADATA", wheel_meta.encode("utf-8"))
    with tarfile.open(sdist, "w:gz") as archive:
        data = sdist_meta.encode("utf-8")
        info = tarfile.TarInfo("ci_evals-0.1.0/PKG-INFO")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return wheel, sdist


def test_complete_metadata_passes(release: ModuleType, tmp_path: Path) -> None:
    assert "—" in DESCRIPTION  # UTF-8 beyond ASCII: read as the file's encoding
    wheel, sdist = release_files(tmp_path, metadata(), metadata())
    assert release.check_metadata(wheel, sdist) == []


@pytest.mark.parametrize(
    ("wheel_meta", "problem"),
    [
        (metadata(drop=("License-Expression",)), "no License-Expression in METADATA"),
        (metadata(urls=["Homepage", "Source", "Issues"]), "no Project-URL Changelog"),
        (metadata(drop=("Classifier",)), "no Classifier"),
        (
            metadata(**{"Description-Content-Type": "text/x-rst"}),
            "the long description is not declared text/markdown",
        ),
        (metadata(body="# ci-evals\n\nThe whole manual.\n"), "the long description is not PYPI.md"),
    ],
)
def test_each_gap_is_named(
    release: ModuleType, tmp_path: Path, wheel_meta: str, problem: str
) -> None:
    wheel, sdist = release_files(tmp_path, wheel_meta, metadata())
    found = release.check_metadata(wheel, sdist)
    assert any(problem in line for line in found), found


def test_the_sdist_must_say_what_the_wheel_says(release: ModuleType, tmp_path: Path) -> None:
    wheel, sdist = release_files(tmp_path, metadata(), metadata(Summary="Something else."))
    assert release.check_metadata(wheel, sdist) == [
        "ci_evals-0.1.0.tar.gz and ci_evals-0.1.0-py3-none-any.whl differ in Summary"
    ]


def test_the_page_links_nowhere_relative(release: ModuleType) -> None:
    """PYPI.md's links work on an index page: absolute, https."""
    targets = release.LINK_TARGET.findall(DESCRIPTION)
    assert targets and all(t.startswith("https://") for t in targets)
    assert release.LINK_TARGET.findall("see [the docs](docs/run.md)") == ["docs/run.md"]


def test_a_tag_needs_its_changelog_entry(release: ModuleType) -> None:
    assert release.check_changelog("0.1.0") == []  # `## 0.1.0 — …`
    assert release.check_changelog("0.1") == [
        "CHANGELOG.md has no `## 0.1` entry: say what this release changes"
    ]
    assert release.check_changelog("9.9.9") != []
