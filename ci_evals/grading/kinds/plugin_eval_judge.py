"""The judge of `claude plugin eval`'s `llm` and `baseline` graders, through the run's endpoint.

The prompts, the system prompt, the three sequential votes, the vote rule and
the cut of long text are the CLI's (2.1.337, read from its bundled code):

- `llm`: "You are grading the output of a coding agent against a criterion."
  with the criterion and the focus text (cut in the middle past 100,000
  UTF-16 units: the first 80,000 and the last 20,000 kept);
- `baseline`: "You are comparing a NEW coding-agent trajectory against a
  BASELINE." with both trajectories (past 24 messages, the first and last 12);
- a vote is PASS when the answer matches /\\bPASS\\b/i and not /\\bFAIL\\b/i;
  the grader passes on a majority (2 of 3).

Where ci-evals differs, it fails closed: an answer that is neither PASS nor
FAIL (or both), or a request the endpoint did not answer, makes the grader an
error, never a FAIL vote (the CLI counts it FAIL). The requests go to the
run's endpoint (the stage's: the forwarding proxy, which meters them against
the run budget, or the stub, which counts an unanswered one against the
stage), not streamed, with no tools and at most `MAX_TOKENS` output tokens.
"""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ci_evals.grading.kinds.base import ModelEndpoint

SYSTEM = "You are a strict, terse evaluation judge for coding-agent traces."
VOTES = 3
# What `--judge-model haiku` resolves to in the CLI (its help's default; F4 in
# docs/plugin-evals.md: against a custom endpoint it used its main model).
DEFAULT_MODEL = "claude-haiku-5-5"
# One word is asked for. The CLI asks for 128,000; the proxy reserves each
# request's worst case against the run budget before it forwards it.
MAX_TOKENS = 1024
ANSWER = "Respond with exactly one word: PASS or FAIL."
LLM_INTRO = "You are grading the output of a coding agent against a criterion."
MAX_TEXT = 100_000  # UTF-16 units, as JavaScript counts a string's length
TAIL = 20_000
LONG_FILE = 8_000  # a file focus longer than this gets the CLI's note
MAX_MESSAGES = 24  # a trajectory longer than this is shown as its first and last 12
_REPLY_MAX = 4 << 20
_TIMEOUT_S = 300.0
# JavaScript's /\bPASS\b/i: \b between ASCII word characters and others; without
# the `u` flag, `i` folds only these letters' own cases (U+017F is no `s` there).
_PASS = re.compile(r"(?<![A-Za-z0-9_])[Pp][Aa][Ss][Ss](?![A-Za-z0-9_])")
_FAIL = re.compile(r"(?<![A-Za-z0-9_])[Ff][Aa][Ii][Ll](?![A-Za-z0-9_])")


class JudgeError(Exception):
    """The judge gave no verdict to trust: the grader is an error."""

    def __init__(self, message: str, ballot: Ballot) -> None:
        super().__init__(message)
        self.ballot = ballot


@dataclass
class Ballot:
    """A judge's votes so far, its answers as given, and what they cost."""

    votes: list[bool] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    cost_usd: float = 0.0

    @property
    def passed(self) -> bool:
        return sum(self.votes) > len(self.votes) / 2

    @property
    def shown(self) -> str:
        """The CLI's explanation: `judge votes: PASS FAIL PASS`."""
        return "judge votes: " + " ".join("PASS" if v else "FAIL" for v in self.votes)


def llm_prompt(criteria: str, label: str, text: str) -> tuple[str, str]:
    """The `llm` judge's prompt and its evidence (the text as shown, cut if long);
    `label` names the focus: `last_message`, `trace`, `files`, `file PATH`."""
    evidence = middle_cut(text)
    head = f"{LLM_INTRO}\n\nCriterion:\n{criteria}"
    return f"{head}\n\n\nAgent output ({label}):\n{evidence}\n\n\n{ANSWER}", evidence


def baseline_prompt(criteria: str, baseline: Sequence[str], new: Sequence[str]) -> str:
    """The `baseline` judge's prompt: each trajectory one JSON text per message."""
    return "\n\n".join(
        [
            "You are comparing a NEW coding-agent trajectory against a BASELINE.",
            f"Criterion:\n{criteria}",
            f"\nBASELINE trajectory:\n{messages_text(baseline)}",
            f"\nNEW trajectory:\n{messages_text(new)}",
            "\nDoes the NEW trajectory satisfy the criterion at least as well as the BASELINE?",
            ANSWER,
        ]
    )


def messages_text(lines: Sequence[str]) -> str:
    """A trajectory for the judge: its messages one per line, or past 24 the first 12,
    a line saying how many were left out, and the last 12."""
    if len(lines) <= MAX_MESSAGES:
        return "\n".join(lines)
    half = MAX_MESSAGES // 2
    elided = f"[\u2026{len(lines) - MAX_MESSAGES} messages elided\u2026]"
    return "\n".join([*lines[:half], elided, *lines[-half:]])


def middle_cut(text: str) -> str:
    """`text`, or past 100,000 UTF-16 units its first 80,000 and last 20,000 with a
    line saying how many were left out; a surrogate pair is never split."""
    units = text.encode("utf-16-le", "surrogatepass")
    total = len(units) // 2
    if total <= MAX_TEXT:
        return text
    head = units[: 2 * (MAX_TEXT - TAIL)]
    if 0xD800 <= int.from_bytes(head[-2:], "little") <= 0xDBFF:
        head = head[:-2]
    tail = units[-2 * TAIL :]
    if 0xDC00 <= int.from_bytes(tail[:2], "little") <= 0xDFFF:
        tail = tail[2:]
    elided = total - len(head) // 2 - len(tail) // 2
    first, last = (part.decode("utf-16-le", "surrogatepass") for part in (head, tail))
    return f"{first}\n[\u2026{elided} chars elided\u2026]\n{last}"


def read_vote(answer: str) -> bool | None:
    """PASS (True), FAIL (False), or None when the answer says neither or both."""
    says_pass, says_fail = bool(_PASS.search(answer)), bool(_FAIL.search(answer))
    if says_pass == says_fail:
        return None
    return says_pass


def judge(endpoint: ModelEndpoint, model: str, prompt: str) -> Ballot:
    """Three votes on `prompt`, asked one after another as the CLI asks them.
    `JudgeError` (with the ballot so far) on the first vote that is not a verdict."""
    ballot = Ballot()
    for number in range(1, VOTES + 1):
        if endpoint.budget_usd is not None and ballot.cost_usd >= endpoint.budget_usd:
            raise JudgeError(f"vote {number}: the run budget is spent", ballot)
        try:
            answer, cost = ask(endpoint, model, prompt)
        except JudgeError as exc:
            raise JudgeError(f"vote {number}: {exc}", ballot) from None
        ballot.answers.append(answer)
        ballot.cost_usd += cost
        vote = read_vote(answer)
        if vote is None:
            shown = json.dumps(answer[:200], ensure_ascii=False)
            raise JudgeError(
                f"vote {number}: the judge answered {shown}, neither PASS nor FAIL alone "
                "(claude plugin eval counts it FAIL; ci-evals fails closed)",
                ballot,
            )
        ballot.votes.append(vote)
    return ballot


def ask(endpoint: ModelEndpoint, model: str, prompt: str) -> tuple[str, float]:
    """One request to the endpoint; its text and what it cost. `JudgeError` when it
    gives no answer (unreachable, an HTTP error, not a Messages API reply)."""
    from ci_evals.endpoints.pricing import PricedUsage, Pricing  # noqa: PLC0415 - only when judging

    base = endpoint.env.get("ANTHROPIC_BASE_URL", "")
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise JudgeError(f"the run's endpoint has no usable URL ({base!r})", Ballot())
    headers = {"content-type": "application/json", "anthropic-version": "2023-06-01"}
    if endpoint.env.get("ANTHROPIC_API_KEY"):
        headers["x-api-key"] = endpoint.env["ANTHROPIC_API_KEY"]
    elif endpoint.env.get("ANTHROPIC_AUTH_TOKEN"):
        headers["authorization"] = f"Bearer {endpoint.env['ANTHROPIC_AUTH_TOKEN']}"
    body = {
        "model": model,
        "max_tokens": MAX_TOKENS,
        "system": SYSTEM,
        "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}],
    }
    connection_class = (
        http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    )
    # Never through a proxy from our own environment: the endpoint is the run's.
    conn = connection_class(parts.hostname, parts.port, timeout=_TIMEOUT_S)
    try:
        conn.request(
            "POST",
            parts.path.rstrip("/") + "/v1/messages",
            body=json.dumps(body).encode(),
            headers=headers,
        )
        response = conn.getresponse()
        data = response.read(_REPLY_MAX + 1)
    except (OSError, http.client.HTTPException) as exc:
        raise JudgeError(f"the endpoint did not answer ({exc})", Ballot()) from None
    finally:
        conn.close()
    try:
        reply = json.loads(data) if len(data) <= _REPLY_MAX else None
    except ValueError:
        reply = None
    if response.status != 200 or not isinstance(reply, dict):
        message = _error_message(reply) or data[:200].decode("utf-8", "replace")
        raise JudgeError(f"the endpoint answered HTTP {response.status}: {message}", Ballot())
    content = reply.get("content")
    blocks = content if isinstance(content, list) else []
    text = "\n".join(
        b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)
    )
    usage = reply.get("usage")
    answered = reply.get("model")
    cost = Pricing().cost(
        answered if isinstance(answered, str) else model,
        PricedUsage.from_api(usage if isinstance(usage, dict) else {}),
    )
    return text, cost


def _error_message(reply: object) -> str | None:
    if isinstance(reply, dict) and isinstance(reply.get("error"), dict):
        message = reply["error"].get("message")
        return message if isinstance(message, str) else None
    return None
