"""`report --html DIR`: a static site of one run folder (docs/report.md#html).

One page for the run and one per stage run, self-contained (style inlined,
no script, no request to anything: it works from a downloaded artifact or
GitHub Pages). It reads the run folder only: `results.json` (already read by
the caller), the trajectories and the saved states, all as untrusted data
(`source`, `markup.esc`). The site is built in a fresh folder beside DIR and
moved into place whole; a DIR that exists is replaced only when it is a
site ci-evals wrote (it holds `MARKER`), never a folder of the user's.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals.errors import UserError
from ci_evals.report import scenario_label, stage_label
from ci_evals.report.html.markup import SHELL_END, shell_start
from ci_evals.report.html.pages import Site, index_body, stage_body, stage_page_name

if TYPE_CHECKING:
    from ci_evals.results.model import StageResult

__all__ = ["MARKER", "Site", "write_site"]

MARKER = ".ci-evals-site"


def write_site(site: Site, dest: Path) -> Path:
    """Write the site to `dest`; returns its index page."""
    dest = Path(os.path.abspath(dest))
    if dest.exists() and not (dest / MARKER).is_file() and not _empty_folder(dest):
        raise UserError(
            "exists and is not a site ci-evals wrote: not replaced",
            file=dest,
            field="--html",
            hint="name a new or empty folder",
        )
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        build = Path(tempfile.mkdtemp(prefix=".ci-evals-site-", dir=dest.parent))
    except OSError as exc:
        raise UserError(f"cannot write: {exc.strerror or exc}", file=dest, field="--html") from None
    try:
        _build(site, build)
        (build / MARKER).write_text("written by ci-evals report --html\n", encoding="utf-8")
        build.chmod(0o755)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(build, dest)
    except OSError as exc:
        raise UserError(f"cannot write: {exc.strerror or exc}", file=dest, field="--html") from None
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return dest / "index.html"


def _empty_folder(path: Path) -> bool:
    return path.is_dir() and not any(path.iterdir())


def _build(site: Site, build: Path) -> None:
    result = site.result
    title = f"ci-evals run {result.run_id}"
    note = result.origin_note  # a stub's or a replay's: on every page, not only the index
    _write(build / "index.html", title, index_body(site), (), note)
    theirs = _baseline_stages(site)
    pages = [
        (index, scenario, stage, f"{scenario_label(result, scenario)} · {stage_label(stage)}")
        for index, scenario in enumerate(result.scenarios)
        for stage in scenario.stages
    ]
    before: StageResult | None = None
    for at, (index, scenario, stage, label) in enumerate(pages):
        if at and pages[at - 1][1] is not scenario:
            before = None  # a scenario starts from its fixtures
        other = theirs.get((scenario.id, scenario.repeat, stage.number))
        body = stage_body(site, scenario, stage, before=before, baseline=other)
        nav = [("index.html", "the run")]
        if at:
            nav.append(
                (stage_page_name(pages[at - 1][0], pages[at - 1][2]), f"← {pages[at - 1][3]}")
            )
        if at + 1 < len(pages):
            nav.append(
                (stage_page_name(pages[at + 1][0], pages[at + 1][2]), f"{pages[at + 1][3]} →")
            )
        _write(build / stage_page_name(index, stage), f"{title}: {label}", body, nav, note)
        # Its saved state is what the next stage started from.
        before = stage if stage.trajectory or stage.produced_dir else None


def _baseline_stages(site: Site) -> dict[tuple[str, int, int], StageResult]:
    """The baseline's stage runs by (scenario, repeat, stage number), when it is a run folder."""
    from ci_evals.report.baseline import Comparison  # noqa: PLC0415 - the runtime type

    if not isinstance(site.comparison, Comparison) or site.baseline_dir is None:
        return {}
    return {
        (scenario.id, scenario.repeat, stage.number): stage
        for scenario in site.comparison.baseline.scenarios
        for stage in scenario.stages
    }


def _write(
    path: Path, title: str, body: Iterable[str], nav: Iterable[tuple[str, str]], note: str
) -> None:
    with path.open("w", encoding="utf-8") as out:
        out.write(shell_start(title, nav=nav, note=note))
        for chunk in body:
            out.write(chunk)
        out.write(SHELL_END)
