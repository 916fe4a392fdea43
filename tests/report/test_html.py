"""`ci-evals report RUN --html DIR`: the run as a static site.

Run folders are laid out as the runner writes them (results.json by the real
models and `write_results`, trajectories in the CLI's and the loop agent's
line formats, saved states in `after/`), plus one real run of the labsmith
example. The pages are opened in a real headless Chromium (Debian's, driven by
playwright with `executable_path`): assertions on the elements and their text;
the injection tests listen for dialogs and console messages.
"""

from __future__ import annotations

import difflib
import json
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ci_evals.report.baseline import compare
from ci_evals.report.html import Site, write_site
from ci_evals.report.html.files import DiffBudget, unified
from ci_evals.report.html.timeline import TimelineCaps
from ci_evals.report.verify import problems
from ci_evals.results.criteria import Criterion, GraderResult, StageVerdict
from ci_evals.results.model import FileChange, RunResult, read_results, write_results
from tests.conftest import copy_example, git
from tests.report.test_report import a_run, criterion, failed_stage, passed_stage, scenario, verdict

EVIL = '<img src=x onerror="alert(1)"><script>alert(2)</script>'


def chromium_path() -> str:
    found = os.environ.get("CI_EVALS_CHROMIUM") or shutil.which("chromium")
    if found is None:
        pytest.fail("these tests need Debian's chromium: apt-get install -y chromium")
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=chromium_path(), args=["--no-sandbox", "--disable-gpu"]
        )
        yield launched
        launched.close()


class Opened:
    """A page with every dialog and console message it raised recorded."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.page = browser.new_page()
        self.dialogs: list[str] = []
        self.console: list[str] = []
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("console", lambda m: self.console.append(m.text))
        self.page.goto(path.as_uri())

    def text(self) -> str:
        return str(self.page.inner_text("body"))


def line(kind: str, **fields: Any) -> str:
    return json.dumps({"time": 1.0, "elapsed_s": 0.5, "type": kind, **fields}) + "\n"


def sdk_trajectory(tool_output: str = "chapters listed") -> str:
    """The shape the Claude Code CLI's messages take in trajectory.jsonl."""
    return "".join(
        [
            line("SystemMessage", subtype="init", data={"model": "claude-sonnet-4-5", "tools": []}),
            line(
                "AssistantMessage",
                model="claude-sonnet-4-5",
                parent_tool_use_id=None,
                content=[
                    {"text": "Let me look."},
                    {"id": "t1", "name": "Bash", "input": {"command": "ls lab"}},
                ],
                usage={"input_tokens": 1000, "output_tokens": 200},
            ),
            line(
                "UserMessage",
                parent_tool_use_id=None,
                content=[{"tool_use_id": "t1", "content": tool_output, "is_error": False}],
            ),
            line(
                "AssistantMessage",
                model="claude-sonnet-4-5",
                parent_tool_use_id=None,
                content=[{"id": "t2", "name": "Agent", "input": {"subagent_type": "lab:writer"}}],
                usage={"input_tokens": 10, "output_tokens": 5},
            ),
            line(
                "AssistantMessage",
                model="claude-sonnet-4-5",
                parent_tool_use_id="t2",
                content=[{"text": "Writing inside the subagent."}],
                usage={"input_tokens": 10, "output_tokens": 5},
            ),
            line("ResultMessage", subtype="success", num_turns=3, total_cost_usd=0.01, result="ok"),
        ]
    )


def lay_stage(
    run: Path, scenario_id: str, stage: Any, files: dict[str, str], trajectory: str
) -> None:
    """A stage's folder as the runner leaves it: trajectory, produced/, after/."""
    folder = run / scenario_id / f"{stage.number}-{stage.name}"
    after = folder / "after"
    after.mkdir(parents=True)
    for rel, text in files.items():
        (after / rel).parent.mkdir(parents=True, exist_ok=True)
        (after / rel).write_text(text)
    (folder / "trajectory.jsonl").write_text(trajectory)
    stage.trajectory = f"{scenario_id}/{stage.number}-{stage.name}/trajectory.jsonl"
    stage.produced_dir = f"{scenario_id}/{stage.number}-{stage.name}/produced"


def changed(path: str, change: str = "added", text: str = "x") -> FileChange:
    return FileChange(path=path, change=change, sha256="0" * 64, size=len(text))  # type: ignore[arg-type]


def failing_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    one, two = passed_stage(1), failed_stage(2)
    one.produced = [changed("plan.json", text='{"chapters": 3}\n')]
    two.produced = [changed("plan.json", "modified", '{"chapters": 4}\n'), changed("notes.md")]
    lay_stage(run, "acme", one, {"plan.json": '{"chapters": 3}\n'}, sdk_trajectory())
    lay_stage(
        run, "acme", two, {"plan.json": '{"chapters": 4}\n', "notes.md": "x"}, sdk_trajectory()
    )
    write_results(run, a_run(scenario("acme", one, two)))
    return run


def site_of(run: Path, dest: Path, **kw: Any) -> Path:
    result = read_results(run)
    return write_site(Site(result, run, problems(result), **kw), dest)


# ------------------------------------------------------------------------------ in the browser


@pytest.mark.slow
def test_a_failing_run(tmp_path: Path, browser: Any) -> None:
    index = site_of(failing_run(tmp_path), tmp_path / "site")
    page = Opened(browser, index)
    assert page.page.inner_text("h1") == "ci-evals run 20260304T050607Z-abcdef: failed"
    rows = page.page.locator("table").nth(1).locator("tbody tr")
    assert rows.count() == 2
    assert "failed" in rows.nth(1).inner_text()
    assert "plan.json: 4 != 3" not in page.text()  # criteria live on the stage's page
    page.page.get_by_role("link", name="2 s2").click()
    stage = page.text()
    assert "acme · 2 s2: failed" in stage
    assert "plan.json: 4 != 3" in stage  # the failed criterion's detail
    assert "modified plan.json" in stage
    page.page.get_by_text("modified plan.json").click()  # open the file's fold
    diff = page.page.locator(".diff-add").all_inner_texts()
    assert '+{"chapters": 4}' in diff
    assert page.page.locator(".event").count() == 6
    assert page.page.locator(".event.depth-1").count() == 1  # the subagent's message, nested
    assert "1,000 in · 200 out" in stage  # tokens and cost per turn
    assert "success, 3 turns, $0.01 (as the CLI counts it)" in stage  # the result, to the cent
    assert page.dialogs == [] and page.console == []


@pytest.mark.slow
def test_agent_text_never_runs(tmp_path: Path, browser: Any) -> None:
    run = tmp_path / "run"
    evil = criterion(EVIL, False, rationale=EVIL)
    stage = failed_stage(1)
    stage.grading = verdict("failed", EVIL, evil)
    stage.error = EVIL
    stage.produced = [changed(f"{EVIL}.md")]
    lay_stage(run, "acme", stage, {}, sdk_trajectory(tool_output=EVIL) + line(EVIL, x=EVIL))
    write_results(run, a_run(scenario("acme", stage)))
    index = site_of(run, tmp_path / "site")
    for html in sorted((tmp_path / "site").glob("*.html")):
        page = Opened(browser, html)
        for fold in page.page.locator("summary").all():
            fold.click()  # open every fold: nothing inside runs either
        assert page.page.locator("script").count() == 0
        assert page.page.locator("img").count() == 0
        assert page.dialogs == [], html
        assert page.console == [], html
    assert EVIL in Opened(browser, index.parent / "stage-1-1.html").text()  # shown as text


@pytest.mark.slow
def test_repeats_and_a_baseline(tmp_path: Path, browser: Any) -> None:
    base = failing_run(tmp_path / "base")
    run = tmp_path / "run"
    runs = []
    for repeat, score in enumerate((4.0, 2.0, 5.0)):
        s = passed_stage(1)
        s.grading = verdict(
            "passed" if score >= 3 else "failed",
            "scored",
            Criterion(
                id="clarity", kind="analytic", score=score, passed=score >= 3, source="reviewer"
            ),
        )
        s.status = "passed" if score >= 3 else "failed"
        s.produced = [changed("plan.json", text='{"chapters": 3}\n')]
        lay_stage(run / f"r{repeat}", "acme", s, {"plan.json": '{"chapters": 5}\n'}, "")
        s.trajectory = f"r{repeat}/{s.trajectory}"
        s.produced_dir = f"r{repeat}/{s.produced_dir}"
        runs.append(scenario("acme", s, repeat=repeat))
    write_results(run, a_run(*runs, repeat=3, pass_at_least=2))
    comparison = compare(read_results(run), read_results(base))
    index = site_of(run, tmp_path / "site", comparison=comparison, baseline_dir=base)
    page = Opened(browser, index)
    text = page.text()
    assert "Over the repeats" in text
    assert "2 of 3 passed (at least 2 needed)" in text
    assert "3.67 [" in text  # the mean of 4, 2, 5 with its interval
    assert "Against the baseline" in text
    assert "Per stage" in text
    page.page.goto((index.parent / "stage-1-1.html").as_uri())
    page.page.get_by_text("added plan.json").click()
    assert "Against the baseline run" in page.text()
    assert page.dialogs == [] and page.console == []


@pytest.mark.slow
def test_a_loop_agent_trajectory(tmp_path: Path, browser: Any) -> None:
    run = tmp_path / "run"
    stage = passed_stage(1)
    trajectory = "".join(
        [
            line("LoopStarted", model="claude-haiku-4-5", sandbox="bwrap", prompt="Build it."),
            line(
                "AssistantMessage",
                step=1,
                model="claude-sonnet-4-5",
                content=[
                    {"type": "text", "text": "Build the server."},
                    {"type": "tool_use", "id": "c1", "name": "run_command", "input": {"a": 1}},
                ],
                usage={"input_tokens": 50, "output_tokens": 7},
                cost_usd=0.001,
            ),
            line(
                "ToolResult",
                step=1,
                tool_use_id="c1",
                tool="run_command",
                output="server.py",
                is_error=False,
                exit_code=0,
                duration_s=0.01,
            ),
            line("Nudge", step=2, text="Call a tool or final_submit."),
        ]
    )
    lay_stage(run, "task", stage, {}, trajectory)
    write_results(run, a_run(scenario("task", stage)))
    index = site_of(run, tmp_path / "site")
    page = Opened(browser, index.parent / "stage-1-1.html")
    text = page.text()
    assert "assistant, step 1" in text
    assert "tool result: run_command" in text
    assert "exit_code 0" in text
    assert "nudge (no tool call)" in text
    assert page.page.locator("h2:has-text('Prompt') + pre").inner_text() == "Build it."
    assert "model used\tclaude-haiku-4-5" in page.page.locator("table").first.inner_text()
    assert "loop started: the prompt" in text
    assert page.dialogs == [] and page.console == []


@pytest.mark.slow
def test_a_real_run_of_the_example(tmp_path: Path, browser: Any) -> None:
    """The labsmith example from stage 4 on the stub model, then `report --html`."""
    ex = copy_example(tmp_path / "ex").root
    git(ex, "init", "-q", "-b", "main")  # the stage map lives in a repository
    model = "stub:examples/labsmith/stub/labsmith.yaml"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    ran = subprocess.run(
        [sys.executable, "-m", "ci_evals", "run", "--model", model, "--from-stage", "5",
         "--scenario", "acme-arm", "--out", str(tmp_path / "run")],
        cwd=ex, capture_output=True, text=True, timeout=600, check=False, env=env,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    made = subprocess.run(
        [sys.executable, "-m", "ci_evals", "report", str(tmp_path / "run"),
         "--html", str(tmp_path / "site"), "--markdown", str(tmp_path / "s.md"),
         "--html-url", "https://example.org/run/"],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert "(https://example.org/run/)" in (tmp_path / "s.md").read_text()
    page = Opened(browser, tmp_path / "site" / "index.html")
    assert page.page.inner_text("h1").endswith(": passed")
    page.page.get_by_role("link", name="5 generate-chapter").click()
    text = page.text()
    assert "follows-plan" in text and "reviewer" in text  # the reviewer's criteria
    assert "tool call Agent" in text
    assert "The reviewer's trajectory" in text
    # The CLI backend writes the prompt first; the init message names the model used.
    assert "Not recorded in the trajectory" not in text
    assert (
        page.page.locator("h2:has-text('Prompt') + pre").inner_text()
        == "/labsmith:generate-chapter all"
    )
    assert "model used\tnot recorded" not in text
    assert page.dialogs == [] and page.console == []


# ------------------------------------------------------------------------------ without one


def test_reads_nothing_outside_the_run_folder(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOKEN-123\n")
    run = tmp_path / "run"
    stage = passed_stage(1)
    stage.produced = [changed("leak.md")]
    lay_stage(run, "acme", stage, {}, sdk_trajectory())
    after = run / "acme" / "1-s1" / "after"
    (after / "leak.md").symlink_to(secret)  # the agent's link, kept as a link in after/
    stage.trajectory = "../secret.txt"  # an edited results file
    write_results(run, a_run(scenario("acme", stage)))
    site_of(run, tmp_path / "site")
    page = (tmp_path / "site" / "stage-1-1.html").read_text()
    assert "TOKEN-123" not in page
    assert "not a path inside the run folder: ../secret.txt" in page


def test_a_huge_trajectory_is_cut_not_read_whole(tmp_path: Path) -> None:
    run = tmp_path / "run"
    stage = passed_stage(1)
    big = line("UserMessage", content=[{"tool_use_id": "t", "content": "y" * (3 << 20)}])
    many = sdk_trajectory() * 200
    lay_stage(run, "acme", stage, {}, big + many)
    write_results(run, a_run(scenario("acme", stage)))
    site = tmp_path / "site"
    site_of(run, site)  # defaults: the 3 MiB line is skipped unparsed
    page = (site / "stage-1-1.html").read_text()
    assert "<b>event not shown</b>" in page and "<p>3,145,8" in page and "bytes: too large" in page
    result = read_results(run)
    small = TimelineCaps(page_chars=5_000, text_chars=50)
    write_site(Site(result, run, [], limits=small), site)
    page = (site / "stage-1-1.html").read_text()
    assert "more events not shown" in page
    assert len(page) < 50_000


def swapped_pairs(size: int, tag: str) -> tuple[str, str]:
    """About `size` bytes of distinct lines, and the same with every pair of lines
    swapped: difflib's search finds one-line matches only, peels two lines at a time
    off a range it scans whole, and so takes time quadratic in the lines (5,600 of
    them: 3 to 7 s a file on a 2-core machine)."""
    old = [f"{tag} line {i:06d}" for i in range(size // (len(tag) + 13))]
    new = [line for i in range(0, len(old) - 1, 2) for line in (old[i + 1], old[i])]
    return "\n".join(old) + "\n", "\n".join(new) + "\n"


def test_large_modified_files_are_diffed_within_a_counted_budget(tmp_path: Path) -> None:
    run = tmp_path / "run"
    one, two = passed_stage(1), passed_stage(2)
    files = {"small.md": ("a\nb\nc\n", "a\nB\nc\n")}
    files |= {f"big{k}.txt": swapped_pairs(84_000, f"f{k}") for k in range(5)}
    one.produced = [changed(name, text=old) for name, (old, _) in files.items()]
    two.produced = [changed(name, "modified", new) for name, (_, new) in files.items()]
    lay_stage(run, "acme", one, {n: old for n, (old, _) in files.items()}, sdk_trajectory())
    lay_stage(run, "acme", two, {n: new for n, (_, new) in files.items()}, sdk_trajectory())
    write_results(run, a_run(scenario("acme", one, two)))

    budget = DiffBudget()  # the defaults: each big file is over the per-diff bound
    site_of(run, tmp_path / "site", diffs=budget)
    page = (tmp_path / "site" / "stage-1-2.html").read_text()
    assert 0 < budget.spent <= budget.per_site
    assert '<span class="diff-del">-b</span>\n<span class="diff-add">+B</span>' in page
    said = "Not matched line by line (more than 1,000,000 steps): lines 1 to 5,600 before"
    assert page.count(said) == 5, page.count("Not matched")
    assert page.count("more diff lines</div>") == 5  # each shown whole, then cut

    # A smaller site budget: the first big file spends most of it, the rest get none.
    budget = DiffBudget(per_diff=300_000, per_site=400_000)
    site_of(run, tmp_path / "site", diffs=budget)
    page = (tmp_path / "site" / "stage-1-2.html").read_text()
    assert budget.spent <= 400_000
    assert page.count("Not matched line by line (more than 300,000 steps)") == 1
    assert page.count("(the site&#x27;s 400,000 steps for diffs are spent)") == 4, page


def apply(old: list[str], diff: list[str]) -> list[str]:
    """`diff` (unified, as `unified` writes it) applied to `old`, every line checked."""
    out: list[str] = []
    at = 0
    for line in diff[2:]:
        if line.startswith("@@"):
            start, _, length = line.split()[1][1:].partition(",")
            begin = int(start) - (1 if length != "0" else 0)
            out += old[at:begin]
            at = begin
        elif line[0] in " -":
            assert old[at] == line[1:], (at, line)
            out += [line[1:]] if line[0] == " " else []
            at += 1
        else:
            out.append(line[1:])
    return out + old[at:]


def test_a_diff_is_true_within_its_budget_and_over_it() -> None:
    rng = random.Random(31)
    for _ in range(2000):
        old = rng.choices("abcde", k=rng.randrange(30))
        new = rng.choices("abcdef", k=rng.randrange(30))
        budget = DiffBudget(per_diff=rng.choice([5, 50, 10**9]))
        diff, unmatched = unified(old, new, budget)
        assert apply(old, diff) == new and (diff == []) == (old == new), (old, new, diff)
        assert budget.spent <= budget.per_diff
        if budget.per_diff == 10**9:  # never cut short
            assert unmatched == ""
    old = [f"line {i}" for i in range(10)]
    new = [*old[:4], "changed", *old[5:]]
    expected = list(difflib.unified_diff(old, new, "before", "after", lineterm=""))
    assert unified(old, new, DiffBudget()) == (expected, "")


def test_never_replaces_a_folder_it_did_not_write(tmp_path: Path) -> None:
    run = failing_run(tmp_path)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    proc = subprocess.run(
        [sys.executable, "-m", "ci_evals", "report", str(run), "--html", str(mine)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().endswith(
        "--html: exists and is not a site ci-evals wrote: not replaced (name a new or empty folder)"
    ), proc.stderr
    assert (mine / "notes.txt").read_text() == "keep me"
    site = tmp_path / "site"
    for _ in range(2):  # its own site it replaces
        again = subprocess.run(
            [sys.executable, "-m", "ci_evals", "report", str(run), "--html", str(site)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert again.returncode == 1, again.stderr  # the run failed; the site is written
        assert (site / "index.html").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".ci-evals-site-")]


@pytest.mark.parametrize(
    "url", ["http://example.org/x", "javascript:alert(1)", "https://a.b/x)[y](z", "https://"]
)
def test_the_link_takes_only_an_https_url(tmp_path: Path, url: str) -> None:
    run = failing_run(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "ci_evals", "report", str(run), "--html-url", url],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert len(proc.stderr.splitlines()) == 1 and "--html-url: not an https URL" in proc.stderr


def test_grader_results_are_kept_apart(tmp_path: Path) -> None:
    """A reviewer's trajectory is shown folded, under its own heading."""
    run = tmp_path / "run"
    stage = passed_stage(1)
    lay_stage(run, "acme", stage, {}, sdk_trajectory())
    (run / "acme" / "1-s1" / "reviewer-trajectory.jsonl").write_text(sdk_trajectory("graded"))
    assert stage.grading is not None
    grader = GraderResult(
        grader="reviewer",
        criteria=stage.grading.criteria,
        trajectory="acme/1-s1/reviewer-trajectory.jsonl",
    )
    stage.grading = StageVerdict(**{**stage.grading.model_dump(), "graders": (grader,)})
    write_results(run, a_run(scenario("acme", stage)))
    site_of(run, tmp_path / "site")
    page = (tmp_path / "site" / "stage-1-1.html").read_text()
    assert "<h2>The reviewer's trajectory</h2><details>" in page and "graded" in page


def test_a_run_without_scenarios_still_has_a_page(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    result: RunResult = a_run(status="interrupted")
    write_results(run, result)
    site_of(run, tmp_path / "site")
    index = (tmp_path / "site" / "index.html").read_text()
    assert '<span class="status interrupted">interrupted</span>' in index
    assert ': <span class="status failed">failed</span></h1>' in index  # never a pass


def test_a_run_whose_ids_are_no_names_gets_no_site(tmp_path: Path) -> None:
    """A scenario id read back from a results file is checked by the rule a suite's is
    (`fs.names`) before the site reads the run folder: one line, no site, no traceback."""
    run = tmp_path / "run"
    write_results(run, a_run(scenario("../escape", passed_stage(1))))
    proc = subprocess.run(
        [sys.executable, "-m", "ci_evals", "report", str(run), "--html", str(tmp_path / "site")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert "scenarios[0].id: an id that would be a folder is refused" in proc.stderr
    assert not (tmp_path / "site").exists()


# ------------------------------------------------------------------------------ a failed run, read


def read_run(tmp_path: Path) -> Path:
    """A stub run of two scenarios, one stage failed, its trajectory as the CLI writes
    it: the prompt first, the init message naming the model, a Write, a Stop hook."""
    run = tmp_path / "run"
    trajectory = "".join(
        [
            line("Prompt", text="/lab:write all\n\nWrite every planned chapter."),
            line("SystemMessage", subtype="init", data={"model": "claude-opus-5-5", "tools": []}),
            line(
                "AssistantMessage",
                model="claude-opus-5-5",
                parent_tool_use_id=None,
                content=[
                    {
                        "id": "w1",
                        "name": "Write",
                        "input": {"file_path": "lab/one.md", "content": "# One\n\nFirst line."},
                    }
                ],
                usage={"input_tokens": 10, "output_tokens": 5},
            ),
            line(
                "HookEventMessage",
                subtype="hook_response",
                hook_event_name="Stop",
                data={
                    "subtype": "hook_response",
                    "hook_event": "Stop",
                    "hook_name": "Stop",
                    "exit_code": 2,
                    "outcome": "error",
                    "stderr": "add an exercise first",
                },
            ),
            line("ResultMessage", subtype="success", num_turns=2, total_cost_usd=0.5, result="ok"),
        ]
    )
    long_reason = "checklist 1 of 2 failed: b; " + "the plan names a chapter nobody wrote " * 2
    acme = [passed_stage(1), failed_stage(2, long_reason)]
    beta = [passed_stage(1), passed_stage(2)]
    acme[0].duration_s, acme[0].cost_usd = 65.4, 0.125
    for sid, stages in (("acme", acme), ("beta", beta)):
        for s in stages:
            lay_stage(run, sid, s, {}, trajectory)
    write_results(
        run,
        a_run(scenario("acme", *acme), scenario("beta", *beta), model_endpoint="stub:s.yaml"),
    )
    return run


@pytest.mark.slow
def test_a_failed_run_as_its_reader_sees_it(tmp_path: Path, browser: Any) -> None:
    index = site_of(read_run(tmp_path), tmp_path / "site")
    page = Opened(browser, index)
    assert page.page.inner_text(".tally") == "3 of 4 stages passed (1 failed)"
    run_cell = page.page.locator("td", has_text="completed").first
    assert "passed" not in (run_cell.locator(".status").get_attribute("class") or "")
    facts = page.page.locator("table").first.inner_text()
    assert "model used\tclaude-opus-5-5" in facts
    assert "2026-03-04 05:06:07 UTC" in facts and ".000" not in facts  # to the second
    first = page.page.locator("table").nth(1).locator("tbody tr").first.inner_text()
    assert "$0.12" in first and "1 min 05 s" in first  # to the cent, to the second
    assert "0.1250" not in page.text()
    # The long reason takes the room the other cells leave: two lines at most, not three.
    rows = page.page.locator("table").nth(1).locator("tbody tr")
    assert rows.nth(1).bounding_box()["height"] < 2.2 * rows.nth(0).bounding_box()["height"]
    assert (
        page.page.locator("td", has_text="1 min 05 s").evaluate(
            "e => getComputedStyle(e).whiteSpace"
        )
        == "nowrap"
    )  # a time or a cost never split over two lines
    assert page.page.locator("td.reason").nth(1).inner_text().startswith("checklist 1 of 2")
    assert (
        page.page.locator(".caveat").inner_text()
        == "stub model: a wiring check, not a model verdict"
    )

    page.page.get_by_role("link", name="2 s2").first.click()
    stage = page.text()
    assert page.page.locator(".caveat").count() == 1  # the stub's caveat on every page
    assert page.page.locator("h2", has_text="Prompt").count() == 1
    assert (
        "/lab:write all\n\nWrite every planned chapter."
        in page.page.locator("pre").first.inner_text()
    )
    assert stage.count("the plan names a chapter nobody wrote") == 2  # the note, once; not again
    write = page.page.locator(".event", has_text="tool call Write")
    assert write.locator("pre").inner_text() == "# One\n\nFirst line."  # text, not JSON
    assert "\\n" not in write.inner_text()
    assert (
        "Stop says:\n\nadd an exercise first"
        in page.page.locator(".event", has_text="hook Stop").inner_text()
    )
    assert "model used\tclaude-opus-5-5" in page.page.locator("table").first.inner_text()
    nav = page.page.locator("nav a").all_inner_texts()
    assert nav == ["the run", "← acme · 1 s1", "beta · 1 s1 →"]
    page.page.get_by_role("link", name="beta · 1 s1 →").click()
    assert page.page.inner_text("h1").startswith("beta · 1 s1")
    assert page.dialogs == [] and page.console == []
