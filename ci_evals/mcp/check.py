"""Run every sub-test for one revision, each against a fresh server process, and score them.

`run_check` takes a sandbox and the server's argv: each sub-test spawns the
server through `sandbox.spawn` (so it runs wherever the sandbox runs things:
the host, bubblewrap, a container), and they run concurrently, so a check
costs about one server start plus the slowest sub-test rather than the sum.
`stdout-clean` is judged last, over every session's stdout.

Which sub-tests are *required* (decide the exit code, or the stage) and
which *advisory* (reported and scored only) is the `Policy`. By default the
two that servers built with the official SDKs fail — they send nothing back
for a malformed line or an invalid request — are advisory.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from ci_evals.mcp import subtests
from ci_evals.mcp.session import NoReply, Session
from ci_evals.mcp.subtests import Options, Outcome
from ci_evals.sandbox.base import Sandbox

DEFAULT_ADVISORY = frozenset({"parse-error", "invalid-request"})
MAX_JOBS = 12  # server processes at once
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
    protocol: str
    subtests: tuple[SubTestResult, ...]

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
            "subtests": [
                {"id": s.id, "passed": s.passed, "required": s.required, "reason": s.reason}
                for s in self.subtests
            ],
            "score": round(self.score, 2),
        }


@dataclass(frozen=True)
class _Run:
    outcome: Outcome
    violations: tuple[str, ...]
    stderr: str
    messages: int = 0  # JSON-RPC messages read from its stdout


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
    at most `jobs` server processes at once."""
    policy = policy or Policy()
    tests = subtests.for_revision(options.revision)

    live = _Live()

    def one(test: subtests.SubTest) -> _Run:
        return _run_one(sandbox, argv, cwd=cwd, env=env, test=test, options=options, live=live)

    pool = ThreadPoolExecutor(max_workers=max(1, min(jobs, len(tests))))
    try:
        futures = [pool.submit(one, test) for test in tests.values()]
        runs = dict(zip(tests, [f.result() for f in futures], strict=True))
    except BaseException:  # Ctrl-C: end every server now, not at its next timeout
        live.stop()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    results = [
        SubTestResult(
            id=name,
            passed=run.outcome.passed,
            required=policy.required(name),
            reason=escape_controls(run.outcome.reason),
            weight=policy.weight(name),
            stderr=run.stderr,
        )
        for name, run in runs.items()
    ]
    results.append(_stdout_clean(runs, policy))
    return Report(protocol=options.revision, subtests=tuple(results))


def _run_one(
    sandbox: Sandbox,
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    test: subtests.SubTest,
    options: Options,
    live: _Live,
) -> _Run:
    try:  # a sandbox may find out at spawn (docker's CLI, local's program) or at start
        session = Session(sandbox.spawn(argv, cwd=cwd, env=env))
    except OSError as exc:
        return _Run(Outcome(False, f"cannot start {argv[0]}: {exc.strerror or exc}"), (), "")
    with session:
        live.add(session)
        try:
            outcome = test(session, options)
        except NoReply as exc:
            outcome = Outcome(False, str(exc))
        except Exception as exc:  # an answer we did not foresee fails its sub-test only
            outcome = Outcome(False, f"unexpected answer ({type(exc).__name__}: {exc})")
    return _Run(outcome, tuple(session.violations), session.stderr, len(session.messages))


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


def _stdout_clean(runs: Mapping[str, _Run], policy: Policy) -> SubTestResult:
    name = subtests.STDOUT_CLEAN
    bad = [(test, text) for test, run in runs.items() for text in run.violations]
    # Silence is no evidence: a server that never wrote (or never started) did not
    # show a clean stdout.
    seen = any(run.messages for run in runs.values())
    if bad:
        test, text = bad[0]
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        reason = f"{text}, in the {test} session{more}"
    elif not seen:
        reason = f"no JSON-RPC message on stdout in any of {len(runs)} sessions: nothing to judge"
    else:
        reason = f"only JSON-RPC on stdout in all {len(runs)} sessions"
    return SubTestResult(
        id=name,
        passed=seen and not bad,
        required=policy.required(name),
        reason=reason,
        weight=policy.weight(name),
    )
