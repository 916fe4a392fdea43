"""The environment an agent's CLI process gets: an allow-list, never the whole of ours.

The agent runs with permissions bypassed and can run any shell command, so
whatever is in its environment it can read, print into a produced file, or send
to the model. CI jobs carry secrets in the environment (`GITHUB_TOKEN`, cloud
keys, registry passwords); none of them may reach the agent. So the CLI gets
only a few harmless variables of ours (`ALLOWED_NAMES`, `ALLOWED_PREFIXES`), the
model endpoint ci-evals opened (`ENDPOINT_NAMES`: the stub's URL, or the local
proxy's and a per-run token, never the real key), its own HOME, TMPDIR,
CLAUDE_CODE_TMPDIR and XDG_RUNTIME_DIR in a private folder, the switches the CLI
needs to run unattended (`FIXED`), and, without a network, the ones that make
package managers fail at once offline instead of retrying for minutes
(`OFFLINE`).

`claude_agent_sdk` merges `os.environ` into the CLI's environment by default;
`ci_evals.agents.claude` spawns the CLI with exactly this mapping instead. The
list in full: docs/run.md (*What a stage gets*); the offline switches:
docs/onboarding.md (*Hooks that loop or wait on the network*).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path

from ci_evals.endpoints.base import ENDPOINT_NAMES
from ci_evals.sandbox.base import SandboxConfig
from ci_evals.sandbox.registry import offline

# Taken from the user's environment when set. Each is here for a reason:
ALLOWED_NAMES: tuple[str, ...] = (
    "PATH",  # find git, python, the tools a stage's Bash calls use
    "LANG",  # text encoding of tool output
    "LANGUAGE",
    "TZ",  # timestamps in produced files match the user's
    "TERM",  # some tools refuse to run with no TERM at all
    "USER",  # `whoami`-style look-ups and git's fallback identity; not secret
    "LOGNAME",
    "SHELL",  # the CLI's Bash tool picks the user's shell
    # Reaching the model endpoint through a corporate proxy or TLS inspection.
    # (A proxy URL can carry a password; it is needed to reach the API at all.)
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "NO_PROXY",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    # The CLI's own knobs for model calls (retries of 5xx/529, request timeout):
    # tuning, not secrets.
    "CLAUDE_CODE_MAX_RETRIES",
    "API_TIMEOUT_MS",
)
ALLOWED_PREFIXES: tuple[str, ...] = ("LC_",)  # locale categories


FIXED: dict[str, str] = {
    # The CLI refuses `bypassPermissions` as root unless it believes it runs in
    # a sandbox; CI containers run as root, and the workspace is throw-away.
    "IS_SANDBOX": "1",
    # No title generation, update checks, telemetry or /api/hello probes: they
    # cost money on the real API and fail (slowly) offline.
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
}


# What package managers read as "no network": each then fails at once on what
# is not cached or vendored, instead of retrying a lookup that cannot succeed.
OFFLINE: dict[str, str] = {
    "npm_config_offline": "true",  # npm, npx, pnpm: only the local cache
    "YARN_ENABLE_NETWORK": "0",  # yarn 2+ (yarn 1 reads npm_config_offline)
    "PIP_NO_INDEX": "1",  # pip: only --find-links
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",  # pip's own check against PyPI
    "UV_OFFLINE": "1",  # uv, uvx
    "CARGO_NET_OFFLINE": "true",
    "GOPROXY": "off",  # go: no module downloads
    "HF_HUB_OFFLINE": "1",  # Hugging Face models and data sets
}


def private_dirs(root: Path) -> dict[str, str]:
    """HOME, TMPDIR, CLAUDE_CODE_TMPDIR and XDG_RUNTIME_DIR under `root`, created (mode 0700)."""
    home, tmp, runtime = root / "home", root / "tmp", root / "run"
    for folder in (home, tmp, runtime):
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o700)  # XDG_RUNTIME_DIR must be private; the others hold transcripts
    return {
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "CLAUDE_CODE_TMPDIR": str(tmp),
        "XDG_RUNTIME_DIR": str(runtime),
    }


def agent_environment(
    source: Mapping[str, str],
    *,
    private_root: Path,
    endpoint: Mapping[str, str],
    offline: bool,
) -> dict[str, str]:
    """The complete environment for one agent CLI process.

    `source` is the user's environment (the command passes `os.environ`);
    only allow-listed names are copied from it. The model endpoint's
    variables come from `endpoint` alone (an `OpenEndpoint.env`: the stub's
    URL, or the forwarding proxy's URL and per-run token), never from
    `source`: the agent never holds the user's real key. `offline`: its
    sandbox has no network (`sandbox.registry.offline`), so package managers
    are told so (`OFFLINE`).
    """
    env = {
        name: value
        for name, value in source.items()
        if name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)
    }
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update({name: value for name, value in endpoint.items() if name in ENDPOINT_NAMES})
    env.update(private_dirs(private_root))
    env.update(FIXED)
    if offline:
        env.update(OFFLINE)
    return env


def environment_for(
    source: Mapping[str, str], endpoint: Mapping[str, str], sandbox: SandboxConfig
) -> Callable[[Path], dict[str, str]]:
    """`agent_environment` for agents run in `sandbox` (a grader's reviewers), given
    the private root of each."""
    no_network = offline(sandbox)

    def env_for(private_root: Path) -> dict[str, str]:
        return agent_environment(
            source, private_root=private_root, endpoint=endpoint, offline=no_network
        )

    return env_for


# What a credential's name looks like. Fail closed: a false alarm costs a
# `--isolation none`, a miss could cost the key.
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")


# A value that carries a password whatever its name: a URL with one in its
# user info (`DATABASE_URL=postgres://app:pw@db/app`, `REDIS_URL`, a proxy URL).
_PASSWORD_IN_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s:]*:[^/?#@\s]+@")


# Names with a credential word in them that hold none (a display's cookie
# file path, a shell's key timeout, a library switch, who wrote a commit).
_HARMLESS_NAMES = frozenset({"XAUTHORITY", "KEYTIMEOUT", "TOKENIZERS_PARALLELISM"})
_HARMLESS_PREFIXES = ("GIT_AUTHOR_", "GIT_COMMITTER_")
# The official python images set GPG_KEY to the release signing key's
# fingerprint: public, and where bubblewrap is often unavailable.
_FINGERPRINT = re.compile(r"[0-9A-Fa-f]{40}")


def secret_names(source: Mapping[str, str]) -> list[str]:
    """Names in `source` that look like credentials (sorted): what an unisolated
    agent could read from our own /proc entry, whatever its environment holds.
    By name (`_SECRET_WORDS`, less a few known to hold none), or by value (a URL
    with a password in it)."""
    return sorted(
        name
        for name, value in source.items()
        if value and (_looks_secret(name, value) or _PASSWORD_IN_URL.search(value))
    )


def _looks_secret(name: str, value: str) -> bool:
    upper = name.upper()
    if upper in _HARMLESS_NAMES or upper.startswith(_HARMLESS_PREFIXES):
        return False
    if upper == "GPG_KEY" and _FINGERPRINT.fullmatch(value.replace(" ", "")):
        return False
    return any(word in upper for word in _SECRET_WORDS)
