"""A plugin with ten `claude plugin eval` cases, for selecting cases by a change.

`helpdesk` has four skills (greet, refund with a policy file, escalate,
summarize), two commands (/triage, /report), an agent (auditor), a README and
a manifest. Its ten cases name them in their prompts and graders as real
suites do (`tool_used` on `Skill` with an `input_match`, a `/command` in the
prompt, the agent's name); one names nothing. `SKILL_CASES` is which cases name
which component: what `ci-evals init` should draft and `compute-stage` select.
Each case's grader is a regex on the last message, which the drafted stub
satisfies.
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import git

PLUGIN = "helpdesk"

_CASES = {
    # name: (prompt, the word its grader looks for, extra grader text)
    "greet-basic": ("Use the greet skill to welcome Ana.", "Welcome", ""),
    "greet-formal": ("Welcome Mr. Li to the help desk, formally.", "Good day", "greet"),
    "refund-small": ("A customer asks for a refund of 20 dollars.", "refunded", ""),
    "refund-large": ("Process a refund of 900 dollars by the policy.", "approval", ""),
    "escalate-angry": ("The customer is furious: escalate the ticket.", "escalated", ""),
    "summarize-thread": ("Summarize this thread of five messages.", "Summary", ""),
    "triage-queue": (f"/{PLUGIN}:triage the queue of new tickets", "triaged", ""),
    "weekly-report": ("/report weekly numbers", "Report", ""),
    "audit-ticket": ("Ask the auditor agent to check ticket 7.", "audited", ""),
    "smalltalk": ("Say hello to the new colleague.", "Hello", ""),
}
# Which cases a change to each component reaches (the cases that name it).
SKILL_CASES = {
    "skills/greet/**": ("greet-basic", "greet-formal"),
    "skills/refund/**": ("refund-large", "refund-small"),
    "skills/escalate/**": ("escalate-angry",),
    "skills/summarize/**": ("summarize-thread",),
    "commands/triage.md": ("triage-queue",),
    "commands/report.md": ("weekly-report",),
    "agents/auditor.md": ("audit-ticket",),
}
CASES = tuple(sorted(_CASES))


def plugin_files() -> dict[str, str]:
    """The plugin's files, relative to its folder."""
    files = {
        ".claude-plugin/plugin.json": f'{{"name": "{PLUGIN}", "version": "1.0.0"}}\n',
        "README.md": "# helpdesk\n\nSkills for a support desk.\n",
        "commands/triage.md": "---\ndescription: Triage tickets\n---\nSort $ARGUMENTS.\n",
        "commands/report.md": "---\ndescription: Report\n---\nWrite the $ARGUMENTS report.\n",
        "agents/auditor.md": "---\nname: auditor\ndescription: audits tickets\n---\nAudit.\n",
    }
    for skill in ("greet", "refund", "escalate", "summarize"):
        files[f"skills/{skill}/SKILL.md"] = (
            f"---\nname: {skill}\ndescription: {skill} a customer\n---\nHow to {skill}.\n"
        )
    files["skills/refund/policy.md"] = "Refunds over 500 dollars need approval.\n"
    for name, (prompt, word, named) in _CASES.items():
        files[f"evals/{name}/prompt.md"] = f"{prompt}\n"
        files[f"evals/{name}/graders/said.md"] = f"---\ntype: regex\nweight: 1\n---\n{word}\n"
        if named:  # the skill it should use, as a tool_used grader names it
            files[f"evals/{name}/graders/used-skill.md"] = (
                f"---\ntype: tool_used\ntool: Skill\ninput_match: {named}\n---\n"
            )
    return files


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def plugin_repo(repo: Path) -> str:
    """`repo` (an empty git repository) with the plugin in `helpdesk/`, committed."""
    write(repo / PLUGIN, plugin_files())
    return commit(repo, "the helpdesk plugin and its ten cases")
