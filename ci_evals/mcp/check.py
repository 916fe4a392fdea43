"""Run every sub-test for one revision against the server, and score them.

`run_check` takes a sandbox and the server's argv and starts the server
through `sandbox.spawn` (so it runs wherever the sandbox runs things: the
host, bubblewrap, a container). Sub-tests share server processes in
*chains* (`subtests.chains`): in a chain each runs only after every earlier
one passed, and what may break or lock a session ends a chain. When a sub-test
fails, its failure stands and the rest of its chain run again, each on a fresh
process: an earlier sub-test cannot have caused a failure that is reported. A
chain's processes all start at once, so the servers' start-up costs overlap.

The first chain's first request decides the revision the others speak (the one
negotiated, or the one asked for: `serves-revision` says whether it is served).
`stdout-clean` and `cache-hints` are judged last, over every message of every
process. Which sub-tests are *required* and which *advisory* is the `Policy`.
The sub-tests, revisions and defaults: docs/mcp-check.md.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ci_evals.mcp import revisions, rules, subtests
from ci_evals.mcp.session import NoReply, Session
from ci_evals.mcp.subtests import Options, SubTestOutcome
from ci_evals.sandbox.base import Sandbox

DEFAULT_ADVISORY = frozenset({"parse-error", "invalid-request", "tools-call-success"})
MAX_JOBS = 12  # server processes at once
_SHOWN = 160  # characters of a result quoted in a reason
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def escape_controls(text: str) -> str:
    """`text` with control characters as visible `\\xNN`: a reason quotes what the
    server named, and a newline or a terminal escape there must not forge report lines."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _no_weights() -> Mapping[str, float]:
    return MappingProxyType({})


@dataclass(frozen=True)
class Policy:
    advisory: frozenset[str] = DEFAULT_ADVISORY
    weights: Mapping[str, float] = field(default_factory=_no_weights)  # default 1 each

    def required(self, subtest: str) -> bool:
        return subtest not in self.advisory

    def weight(self, subtest: str) -> float:
        return self.weights.get(subtest, 1.0)


@dataclass(frozen=True)
class SubTestResult:
    id: str
    passed: bool
    required: bool
    reason: str
    weight: float = 1.0
    stderr: str = ""  # what the server wrote on stderr in this sub-test's session


@dataclass(frozen=True)
class Report:
    protocol: str  # the revision checked (what the server negotiated, without --protocol)
    subtests: tuple[SubTestResult, ...]
    requested: str = ""  # the revision asked for, when another was checked

    @property
    def score(self) -> float:
        """Weighted fraction of sub-tests passed, 0-100 (required and advisory alike)."""
        total = sum(s.weight for s in self.subtests)
        if total == 0:
            return 0.0
        return 100.0 * sum(s.weight for s in self.subtests if s.passed) / total

    @property
    def required_passed(self) -> bool:
        return all(s.passed for s in self.subtests if s.required)

    def as_json(self) -> dict[str, object]:
        return {
            "protocol": self.protocol,
            "requested": self.requested or self.protocol,
            "subtests": [
                {"id": s.id, "passed": s.passed, "required": s.required, "reason": s.reason}
                for s in self.subtests
            ],
            "score": round(self.score, 2),
        }


@dataclass(frozen=True)
class _Process:
    """What one server process showed, for the checks over every process."""

    label: str  # which sub-tests it served
    violations: tuple[str, ...]
    messages: int  # JSON-RPC messages read from its stdout
    results: tuple[tuple[str, object, Any], ...]  # (method, _meta version, result) answered


@dataclass(frozen=True)
class _SubTestRun:
    outcome: SubTestOutcome
    stderr: str


class _Revision:
    """The revision the other sub-tests speak, known once the shared process's first
    request is answered; the fresh processes start meanwhile and wait for it."""

    def __init__(self) -> None:
        self._set = threading.Event()
        self.options: Options | None = None
        self.serves: SubTestOutcome | None = None  # `serves-revision`, when judged

    def decide(self, options: Options, session: Session | None) -> Options:
        asked = options.revision
        if revisions.is_stateless(asked):
            supported = session.supported if session else None
            if supported is not None:
                self.serves = SubTestOutcome(
                    asked in supported,
                    f"server/discover lists supportedVersions {', '.join(supported)}"
                    + ("" if asked in supported else f": not {asked}"),
                )
        else:
            got = session.negotiated if session else None
            if got is not None and options.explicit:
                self.serves = SubTestOutcome(
                    got == asked,
                    f"initialize asked for {asked}, the server answered {got}"
                    + ("" if got == asked else f": it does not serve {asked}"),
                )
            if got is not None and got != asked:
                options = dataclasses.replace(options, revision=got)
        self.options = options
        self._set.set()
        return options

    def wait(self, fallback: Options) -> Options:
        self._set.wait()
        return self.options or fallback


def run_check(
    sandbox: Sandbox,
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    options: Options,
    policy: Policy | None = None,
    jobs: int = MAX_JOBS,
) -> Report:
    """Every sub-test of `options.revision` against `argv` started in `sandbox`,
    at most `jobs` server processes at once (the shared one included)."""
    policy = policy or Policy()
    check = _Check(sandbox, argv, cwd, env, options)
    runs = check.run(jobs)
    decided = check.revision.wait(options)
    results = _results(
        check.tests, runs, serves=check.revision.serves, asked=options, opts=decided, policy=policy
    )
    if revisions.is_stateless(decided.revision):
        results.append(_cache_hints(check.processes, policy, decided.revision))
    results.append(_stdout_clean(check.processes, policy, decided.revision))
    requested = options.revision if decided.revision != options.revision else ""
    return Report(protocol=decided.revision, subtests=tuple(results), requested=requested)


class _Check:
    """One check's server processes: a process per chain, and the re-runs."""

    def __init__(
        self,
        sandbox: Sandbox,
        argv: Sequence[str],
        cwd: Path,
        env: Mapping[str, str],
        options: Options,
    ) -> None:
        self._sandbox, self._argv, self._cwd, self._env = sandbox, argv, cwd, env
        self._options = options
        self.tests = subtests.for_revision(options.revision)
        self._chains = subtests.chains(options.revision)
        self._live = _Live()
        self.revision = _Revision()
        self.processes: list[_Process] = []
        self._lock = threading.Lock()

    def run(self, jobs: int) -> dict[str, _SubTestRun]:
        # The first chain is submitted first: with one worker it still decides the
        # revision before a chain that waits for it runs.
        pool = ThreadPoolExecutor(max_workers=max(1, jobs))
        try:
            futures = [
                pool.submit(self._chain, chain, decides=index == 0)
                for index, chain in enumerate(self._chains)
            ]
            runs: dict[str, _SubTestRun] = {}
            again: list[str] = []
            for future in futures:
                judged, rest = future.result()
                runs.update(judged)
                again += rest
            decided = self.revision.wait(self._options)
            reruns = [pool.submit(self._chain, (name,), opts=decided) for name in again]
            for future in reruns:
                runs.update(future.result()[0])
        except BaseException:  # Ctrl-C: end every server now, not at its next timeout
            self.revision.decide(self._options, None)  # chains may wait for it
            self._live.stop()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        return runs

    def _spawn(self) -> Session | str:
        try:
            session = Session(self._sandbox.spawn(self._argv, cwd=self._cwd, env=self._env))
        except OSError as exc:
            return f"cannot start {self._argv[0]}: {exc.strerror or exc}"
        self._live.add(session)
        return session

    def _chain(
        self, names: Sequence[str], *, decides: bool = False, opts: Options | None = None
    ) -> tuple[dict[str, _SubTestRun], list[str]]:
        """`names` in order on one process, until one fails (its failure stands: only
        traffic the server answered right went before it) or the session speaks
        another revision; the rest are returned, to be run again each on its own."""
        session = self._spawn()  # starts now: the processes' start-ups overlap
        if opts is None:
            opts = self._options if decides else self.revision.wait(self._options)
        if isinstance(session, str):
            if decides:
                self.revision.decide(self._options, None)
            return {names[0]: _SubTestRun(SubTestOutcome(False, session), "")}, list(names[1:])
        outcomes: dict[str, SubTestOutcome] = {}
        again: list[str] = []
        with session:
            for index, name in enumerate(names):
                outcome = outcomes[name] = _judge(self.tests[name], session, opts)
                if decides and index == 0:
                    opts = self.revision.decide(self._options, session)
                drifted = session.negotiated not in (None, opts.revision)
                if not outcome.passed or drifted:
                    again = list(names[index + 1 :])
                    break
        label = f"the {names[0]} session" if len(names) == 1 else "the session of "
        self._finished(session, label + ", ".join(outcomes) if len(names) > 1 else label)
        return {n: _SubTestRun(o, session.stderr) for n, o in outcomes.items()}, again

    def _finished(self, session: Session, label: str) -> None:
        seen = _Process(
            label, tuple(session.violations), len(session.messages), tuple(session.results())
        )
        with self._lock:
            self.processes.append(seen)


class _Live:
    """The sessions running now, so that an interrupted check can end them all at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: list[Session] = []
        self._stopping = False

    def add(self, session: Session) -> None:
        with self._lock:
            self._sessions.append(session)
            stopping = self._stopping
        if stopping:  # started while the check was being stopped
            session.kill()

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            sessions = list(self._sessions)
        for session in sessions:
            session.kill()


def _judge(test: subtests.SubTest, session: Session, opts: Options) -> SubTestOutcome:
    try:
        return test(session, opts)
    except NoReply as exc:
        return SubTestOutcome(False, str(exc))
    except Exception as exc:  # an answer we did not foresee fails its sub-test only
        return SubTestOutcome(False, f"unexpected answer ({type(exc).__name__}: {exc})")


def _results(
    tests: Mapping[str, subtests.SubTest],
    runs: Mapping[str, _SubTestRun],
    *,
    serves: SubTestOutcome | None,
    asked: Options,
    opts: Options,
    policy: Policy,
) -> list[SubTestResult]:
    """In report order: each sub-test, `serves-revision` after the first, and what a
    sub-test judged on the way (`SubTestOutcome.also`) right after it."""
    judged: list[tuple[str, SubTestOutcome, str]] = []
    for index, name in enumerate(tests):
        run = runs[name]
        judged.append((name, run.outcome, run.stderr))
        if index == 0 and serves is not None:
            judged.append((subtests.SERVES_REVISION, serves, run.stderr))
        judged.extend((more, outcome, run.stderr) for more, outcome in run.outcome.also)
    return [
        SubTestResult(
            id=name,
            passed=outcome.passed,
            required=policy.required(name),
            # "does not serve REV" breaks REV's rule; the rest, the checked revision's.
            reason=_reason(
                name, outcome, asked.revision if name == subtests.SERVES_REVISION else opts.revision
            ),
            weight=policy.weight(name),
            stderr=stderr,
        )
        for name, outcome, stderr in judged
    ]


def _result(name: str, outcome: SubTestOutcome, policy: Policy, revision: str) -> SubTestResult:
    """A sub-test judged over every process (no stderr of its own)."""
    return SubTestResult(
        id=name,
        passed=outcome.passed,
        required=policy.required(name),
        reason=_reason(name, outcome, revision),
        weight=policy.weight(name),
    )


def _reason(name: str, outcome: SubTestOutcome, revision: str) -> str:
    """The outcome's reason, and for a failure the spec rule it breaks."""
    reason = outcome.reason
    if not outcome.passed and (rule := rules.cite(name, revision)):
        reason = f"{reason} [{rule}]"
    return escape_controls(reason)


def _stdout_clean(processes: Sequence[_Process], policy: Policy, revision: str) -> SubTestResult:
    name = subtests.STDOUT_CLEAN
    bad = [(p.label, text) for p in processes for text in p.violations]
    # Silence is no evidence: a server that never wrote (or never started) did not
    # show a clean stdout.
    seen = any(p.messages for p in processes)
    count = max(1, len(processes))
    if bad:
        where, text = bad[0]
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        outcome = SubTestOutcome(False, f"{text}, in {where}{more}")
    elif not seen:
        outcome = SubTestOutcome(
            False, f"no JSON-RPC message on stdout in any of {count} sessions: nothing to judge"
        )
    else:
        outcome = SubTestOutcome(True, f"only JSON-RPC on stdout in all {count} sessions")
    return _result(name, outcome, policy, revision)


# 2026-07-28 server/utilities/caching §Cacheable Results: the methods whose
# complete results carry `ttlMs` and `cacheScope`.
CACHEABLE = frozenset(
    {
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    }
)


def _cache_hints(processes: Sequence[_Process], policy: Policy, revision: str) -> SubTestResult:
    """Every cacheable result any sub-test received carries valid cache hints."""
    name = subtests.CACHE_HINTS
    seen = 0
    outcome: SubTestOutcome | None = None
    for process in processes:
        for method, version, result in process.results:
            # Only what was asked in this revision (not meta-required's request without _meta).
            if method not in CACHEABLE or version != revision or not isinstance(result, dict):
                continue
            if result.get("resultType", "complete") != "complete":
                continue  # an input_required result carries none
            seen += 1
            problem = hints_problem(result)
            if problem is not None and outcome is None:
                outcome = SubTestOutcome(
                    False, f"the {method} result (in {process.label}) {problem}: {_shown(result)}"
                )
    if outcome is None:
        outcome = (
            SubTestOutcome(True, f"ttlMs and cacheScope on all {seen} cacheable results")
            if seen
            else SubTestOutcome(
                False, "no cacheable result (server/discover, tools/list) came to judge"
            )
        )
    return _result(name, outcome, policy, revision)


def hints_problem(result: Mapping[str, Any]) -> str | None:
    """Why a cacheable result's hints are wrong; None when they are right."""
    ttl = result.get("ttlMs")
    if "ttlMs" not in result:
        return "has no ttlMs"
    if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 0:
        return f"has ttlMs {_shown(ttl)}, not an integer >= 0"
    scope = result.get("cacheScope")
    if scope not in ("public", "private"):
        return (
            "has no cacheScope"
            if "cacheScope" not in result
            else (f'has cacheScope {_shown(scope)}, not "public" or "private"')
        )
    return None


def _shown(value: object) -> str:
    text = json.dumps(value, separators=(",", ":"), default=str)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."
