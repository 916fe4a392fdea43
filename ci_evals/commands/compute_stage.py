"""`ci-evals compute-stage [BASE]`: the lowest stage the change BASE...HEAD can affect.

Prints the stage number or `none` on stdout (the reason on stderr), or one JSON
object with `--json`, or a report for a person with `--explain`. In GitHub
Actions it also writes the `from_stage`, `reason`, `changed_count`,
`matches_json` and `matches_truncated` step outputs, and reads BASE/HEAD from
the event payload when BASE is not given. A map that selects units (the cases
of a suite of cases, or scenarios its entries name: `selection.units`) adds
them: `units` in `--json`, a `units:` line in `--explain`, and the `units`,
`units_json` and `units_all` outputs.

This runs on every pull request: it imports only the stdlib, PyYAML, pathspec
and our light modules.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path
from typing import TextIO

from ci_evals import git
from ci_evals.errors import EXIT_OK, UserError
from ci_evals.github import actions as gha
from ci_evals.selection import decide as selection
from ci_evals.selection import diff as diff_range
from ci_evals.selection import grader_change
from ci_evals.selection import units as unit_selection
from ci_evals.selection.matcher import GlobMatcher
from ci_evals.selection.stage_map import StageMap, default_map_path, load_stage_map

# `matches_json` must fit in GitHub's 1 MB of outputs per job with room to spare.
MATCHES_OUTPUT_LIMIT = 256 * 1024
# `--explain` lists this many relevant paths; `--json` has all of them.
EXPLAIN_LIMIT = 50


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "base",
        nargs="?",
        metavar="BASE",
        help="the commit the change starts from (diffed from its merge base with HEAD); "
        "in GitHub Actions it defaults to the event's base",
    )
    parser.add_argument("--head", default="HEAD", metavar="REV", help="default: HEAD")
    parser.add_argument(
        "--map",
        type=Path,
        metavar="PATH",
        help="the stage map (default: the nearest stage_map.yaml from the current folder "
        "up to the top of the repository)",
    )
    parser.add_argument(
        "--deepen",
        type=_non_negative,
        default=diff_range.DEFAULT_DEEPEN_TRIES,
        metavar="N",
        help="in a shallow clone, fetch more history at most N times (50, 100, 200, ... "
        "commits) to find BASE and the merge base; 0 never fetches "
        f"(default: {diff_range.DEFAULT_DEEPEN_TRIES})",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit 2 when BASE names no commit (`base-missing`) instead of answering 1 "
        "(every stage) with a warning",
    )
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="print one JSON object")
    form.add_argument("--explain", action="store_true", help="say which file decided, and why")


def run(args: argparse.Namespace) -> int:
    actions = gha.ActionsEnv.from_environ()
    if args.base is None and actions is None:
        raise UserError(
            "BASE is required outside GitHub Actions",
            field="BASE",
            hint="e.g. `ci-evals compute-stage origin/main`",
        )
    map_path: Path = args.map if args.map is not None else default_map_path(Path.cwd())
    if not map_path.is_file():
        load_stage_map(map_path)  # raises the loader's own one-line error
    # The default map lies at the top of the work tree; another needs a look-up.
    repo = (
        map_path.parent
        if args.map is None
        else git.toplevel(Path(os.path.abspath(map_path)).parent)
    )

    def prepare() -> tuple[StageMap, GlobMatcher]:
        stage_map = load_stage_map(map_path)
        return stage_map, GlobMatcher(stage_map.selection_globs)

    # (`ci_evals.main.entry` runs this command with the cyclic collector off.)
    chosen, stage_map = diff_range.compute_overlapped(
        repo, lambda: _range(repo, args, actions), prepare, every_record=args.json
    )
    units = unit_selection.select_units(stage_map, chosen)
    chosen = unit_selection.with_units(chosen, units, stage_map)
    chosen = grader_change.with_regrade(repo, chosen, stage_map)

    if chosen.reason == selection.BASE_MISSING:
        missing = _base_missing(repo, args.base, chosen)
        if args.strict:
            raise UserError(
                missing,
                field="BASE",
                hint="check the name, or fetch it; without --strict the answer is 1 (every stage)",
            )
        warn(f"{missing}; answering 1: every stage runs (--strict exits 2 instead)", sys.stderr)
    if args.json:
        import json  # noqa: PLC0415 - only for --json and Actions outputs

        document = chosen.as_json()
        if units is not None:
            document["units"] = units.as_json()
        if chosen.regrade is not None:
            document["regrade"] = {"reason": chosen.regrade}
        print(json.dumps(document, ensure_ascii=False))
    elif args.explain:
        print(explain(chosen, stage_map, units))
    else:
        print(_stage_text(chosen))
        print(f"ci-evals compute-stage: {_one_line(chosen)}", file=sys.stderr)
        if units is not None:
            print(f"ci-evals compute-stage: {_units_line(units)}", file=sys.stderr)
        if chosen.regrade is not None:
            print(f"ci-evals compute-stage: regrade: {chosen.regrade}", file=sys.stderr)
    if actions is not None:
        write_actions(
            actions,
            chosen,
            sys.stderr,
            selection.fixture_stages(chosen.matches, stage_map),
            units=units,
        )
    return EXIT_OK


def _units_line(units: unit_selection.Units) -> str:
    """`units: all (global-file): ...` or `units: 2 cases: a b` — one line."""
    if units.ids is None:
        return _one_line_detail(f"{units.kind}: all ({units.reason}): {units.detail}")
    return _one_line_detail(f"{units.kind}: {units.detail}: {units.text()}")


def _range(
    repo: Path, args: argparse.Namespace, actions: gha.ActionsEnv | None
) -> diff_range.Range | selection.Selection:
    """BASE...HEAD from the argument, or from the Actions event."""
    if args.base is not None:
        return diff_range.resolve(repo, args.base, args.head, deepen_tries=args.deepen)
    assert actions is not None  # checked by `run`
    from ci_evals.github.event import range_from_event  # noqa: PLC0415 - Actions without BASE only

    event = range_from_event(repo, actions, args.head, deepen=args.deepen > 0)
    if event.base is None:
        return selection.fallback(selection.BASE_MISSING, event.detail)
    found = diff_range.resolve(
        repo,
        event.base,
        event.head,
        deepen_tries=args.deepen,
        rewritable=event.rewritable,
        forced=event.forced,
    )
    return dataclasses.replace(found, notes=(event.detail, *found.notes))


def _base_missing(repo: Path, base: str | None, chosen: selection.Selection) -> str:
    """The fallback's detail, with a near ref name when BASE looks like a typo of one."""
    text = _one_line_detail(chosen.detail)
    if base is None:
        return text
    import difflib  # noqa: PLC0415 - only when BASE names no commit

    near = difflib.get_close_matches(base, git.ref_names(repo), n=1)
    return f"{text} (did you mean {near[0]!r}?)" if near else text


def warn(text: str, stream: TextIO) -> None:
    """One `warning:` line on `stream`, in bold yellow when a person is looking.

    The answer stays the fail-safe 1, so nothing stops; on a terminal the line
    must not read like the reason line beside it. Colour only on a tty, and
    never with `NO_COLOR` set (no-color.org).
    """
    label = "warning:"
    if stream.isatty() and not os.environ.get("NO_COLOR"):
        label = f"\033[1;33m{label}\033[0m"
    print(f"ci-evals compute-stage: {label} {text}", file=stream, flush=True)


def _stage_text(chosen: selection.Selection) -> str:
    return "none" if chosen.from_stage is None else str(chosen.from_stage)


def _one_line(chosen: selection.Selection) -> str:
    """`stage 2 (matched): plugin/x.md: entry 'x.md' (stage_map.yaml:3)` — one line, always."""
    answer = "none" if chosen.from_stage is None else f"stage {chosen.from_stage}"
    return _one_line_detail(f"{answer} ({chosen.reason}): {chosen.detail}")


def explain(
    chosen: selection.Selection, stage_map: StageMap, units: unit_selection.Units | None = None
) -> str:
    """The selection for a person: the range, the answer, the deciding file, the rest."""
    lines: list[str] = []
    if chosen.head is not None:
        if chosen.base is not None:
            span = f"{chosen.base[:12]}...{chosen.head[:12]}"
        else:
            span = f"?...{chosen.head[:12]}"
        if chosen.merge_bases:
            span += " (merge base " + ", ".join(b[:12] for b in chosen.merge_bases) + ")"
        lines.append(f"change:   {span}")
    for note in chosen.notes:
        lines.append(f"note:     {note}")
    if chosen.from_stage is None:
        lines.append("answer:   none — no stage needs to run")
    else:
        name = _stage_name(stage_map, chosen.from_stage)
        lines.append(f"answer:   run from stage {chosen.from_stage}{name}")
    lines.append(f"reason:   {chosen.reason} — {_one_line_detail(chosen.detail)}")
    lines += _units_lines(units)
    if chosen.regrade is not None:
        lines.append(f"regrade: {chosen.regrade} (run --base re-grades the base's saved run)")
    relevant, shown = selection.lowest_relevant(chosen.matches, EXPLAIN_LIMIT)
    ignored = chosen.changed - relevant if chosen.matches else 0
    if chosen.matches:
        lines.append(f"changed:  {chosen.changed} path(s): {relevant} relevant, {ignored} ignored")
    lines += [_match_line(m, m == chosen.decided_by, stage_map) for m in shown]
    if relevant > len(shown):
        lines.append(f"   ... {relevant - len(shown)} more (see --json)")
    unread = _unread(chosen, stage_map)
    lines += _unread_lines(unread)
    ignored -= len(unread)
    if ignored:
        lines.append(f"   {ignored} path(s) outside the plugin root ignored (see --json)")
    changed_fixtures = selection.fixture_stages(chosen.matches, stage_map)
    if changed_fixtures:
        listed = ", ".join(map(str, changed_fixtures))
        lines.append(
            f"fixtures: stage(s) {listed}: their fixture changed — a run on the stub model "
            "serves it as the stage's answer ungraded; grade it: "
            + "; ".join(f"ci-evals check-fixtures --stage {k}" for k in changed_fixtures)
        )
    return "\n".join(lines)


def _match_line(m: selection.Match, deciding: bool, stage_map: StageMap) -> str:
    """One relevant path: its stage, rule and why (`*`: it decided the answer)."""
    rule, why = m.rule, m.why
    if stage_map.evals is not None and m.path.startswith(stage_map.evals + "/"):
        rule, why = unit_selection.CASE_CHANGED, "in the eval folder: see units"  # case by case
    mark = "*" if deciding else " "
    return f" {mark} stage {m.stage}  {selection.quote_path(m.path)}  [{rule}] {why}"


def _units_lines(units: unit_selection.Units | None) -> list[str]:
    """The units a change selects, each with the first path that selected it."""
    if units is None:
        return []
    lines = [f"units:    {_units_line(units)}"]
    lines += [f"   {unit}  {_one_line_detail(why)}" for unit, why in sorted(units.why.items())]
    return lines


def _unread(chosen: selection.Selection, stage_map: StageMap) -> list[selection.Match]:
    """The changed paths no stage reads: matched by `stage: none` entries, or a
    marketplace or manifest change of listing keys only. (Only looked for when the
    map can have them: on a big diff it builds every record.)"""
    if not stage_map.compared_paths and all(e.stage is not None for e in stage_map.entries):
        return []
    unread = (selection.STAGE_NONE, selection.LISTING_ONLY)
    return sorted(m for m in chosen.matches if m.rule in unread)


def _unread_lines(unread: list[selection.Match]) -> list[str]:
    lines = [
        f"   no stage  {selection.quote_path(m.path)}  [{m.rule}] {m.why}"
        for m in unread[:EXPLAIN_LIMIT]
    ]
    if len(unread) > EXPLAIN_LIMIT:
        lines.append(f"   ... {len(unread) - EXPLAIN_LIMIT} more that no stage reads (see --json)")
    return lines


def _stage_name(stage_map: StageMap, stage: int) -> str:
    if 1 <= stage <= len(stage_map.stages):
        return f" ({stage_map.stages[stage - 1]})"
    return ""


def _one_line_detail(text: str) -> str:
    return text.replace("\r", "\\r").replace("\n", "\\n")


def write_actions(
    env: gha.ActionsEnv,
    chosen: selection.Selection,
    log: TextIO,
    fixtures: tuple[int, ...] = (),
    *,
    units: unit_selection.Units | None = None,
) -> None:
    """Step outputs, and one notice annotation naming the deciding file (escaped).

    `units`: the units the change selects (`units`: `all`, `none` or their ids,
    space-separated, for `run --scenario`; `units_json`: the ids as a JSON list,
    `null` for all; `units_all`: `true`/`false`); absent outputs for a map that
    selects none.

    `fixtures` (`fixture_stages`): the stages whose fixture set changed, space-separated,
    for a step that grades them (`check-fixtures --stage K`): on the stub model the
    run serves them as the stages' answers and never grades them."""
    import json  # noqa: PLC0415 - see `run`

    matches, truncated = matches_output(chosen)
    outputs = {
        "from_stage": _stage_text(chosen),
        "reason": chosen.reason,
        "changed_count": str(chosen.changed),
        "matches_json": matches,
        "matches_truncated": "true" if truncated else "false",
        "fixture_stages": " ".join(map(str, fixtures)),
        "regrade": "true" if chosen.regrade is not None else "false",
        "regrade_reason": chosen.regrade or "",
        # The commit BASE resolved to (from the event when no BASE was given): what
        # `run --base` needs to re-grade the base's saved run.
        "base": chosen.base or "",
    }
    if units is not None:
        outputs["units"] = units.text()
        outputs["units_json"] = json.dumps(None if units.ids is None else list(units.ids))
        outputs["units_all"] = "true" if units.ids is None else "false"
    gha.write_outputs(env, outputs)
    decided = chosen.decided_by
    print(
        gha.annotation(
            "warning" if chosen.reason == selection.BASE_MISSING else "notice",
            _one_line(chosen),
            file=decided.path if decided is not None else None,
            title=f"ci-evals compute-stage: {_stage_text(chosen)}",
        ),
        file=log,
    )


def matches_output(
    chosen: selection.Selection, limit: int = MATCHES_OUTPUT_LIMIT
) -> tuple[str, bool]:
    """`matches_json`: the relevant matches, lowest stage first, cut to fit the limit.

    Ignored paths are left out (they are counted in `changed_count`); the second
    value says whether the list was cut.
    """
    import json  # noqa: PLC0415 - see `run`

    encode = json.JSONEncoder(ensure_ascii=False).encode  # `dumps` would make one per call
    parts: list[str] = []
    size = 1  # "[" and "]", less the comma the first record does not need
    # Ask for as many as fit when records average 64 bytes (most are longer),
    # and for more only if they all fit: a few thousand of 100,000, not all.
    want = max(limit // 64, 16)
    while True:
        total, relevant = selection.lowest_relevant(chosen.matches, want)
        for m in relevant[len(parts) :]:
            part = encode(m.as_json())
            size += len(part.encode("utf-8")) + 1
            if size > limit:
                return "[" + ",".join(parts) + "]", True
            parts.append(part)
        if len(relevant) < want:
            break
        want *= 2
    return "[" + ",".join(parts) + "]", total > len(parts)
