"""What a suite names inside its plugin, checked against the plugin's own tree.

A typo in a stage prompt's slash command (`/feature-dev:featuredev`) loads
and runs: the CLI sends the text to the model unexpanded and says so only in
the trajectory. So at load every `/PLUGIN:command` in a stage prompt must name
the suite's plugin and one of its commands (or skills, which the CLI also
offers as `/PLUGIN:skill`), and every reviewer's `agent:` one of its agent
files; each mistake is one line at the prompt's file:line listing the valid
names.

How Claude Code finds them: commands are the markdown files under
`commands/` (a file in a sub-folder `commands/a/b.md` is `a:b`), plus the
files or folders the manifest's `commands` key names; agents likewise under
`agents/` and the manifest's `agents`; skills are `skills/<name>/SKILL.md`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from ci_evals.config.templates import Template
from ci_evals.config.yaml_source import LocatedNode
from ci_evals.errors import Problems
from ci_evals.fs.walk import files_ending

# `/NAME:command` where a slash command can start: the prompt's start or after
# white space (so `http://host:80` is not one). Arguments follow after a space.
_SLASH_COMMAND = re.compile(r"(?:^|(?<=\s))/([A-Za-z0-9][A-Za-z0-9._-]*):(\S+)")


def plugin_commands(plugin_dir: Path, manifest: Mapping[str, object]) -> tuple[str, ...]:
    """Every command name (`feature-dev`, `a:b`) and skill name the plugin offers."""
    names = set(command_files(plugin_dir, manifest))
    skills = plugin_dir / "skills"
    if skills.is_dir():
        names.update(p.parent.name for p in skills.glob("*/SKILL.md") if p.is_file())
    return tuple(sorted(names))


def command_files(plugin_dir: Path, manifest: Mapping[str, object]) -> dict[str, Path]:
    """Command name -> its markdown file (the first found, default folder first)."""
    found: dict[str, Path] = {}
    for folder in _component_paths(plugin_dir, manifest, "commands"):
        for path in _markdown(folder):
            rel = path.relative_to(folder) if folder.is_dir() else Path(path.name)
            found.setdefault(":".join(rel.with_suffix("").parts), path)
    return dict(sorted(found.items()))


def plugin_agents(plugin_dir: Path, manifest: Mapping[str, object]) -> tuple[str, ...]:
    """Every agent file, relative to the plugin folder (`agents/code-reviewer.md`)."""
    found = {
        path.relative_to(plugin_dir).as_posix()
        for folder in _component_paths(plugin_dir, manifest, "agents")
        for path in _markdown(folder)
    }
    return tuple(sorted(found))


def _component_paths(plugin_dir: Path, manifest: Mapping[str, object], key: str) -> list[Path]:
    """The default folder plus what the manifest adds (a path or a list of paths)."""
    extra = manifest.get(key)
    listed = [extra] if isinstance(extra, str) else extra if isinstance(extra, list) else []
    paths = [plugin_dir / key]
    paths += [plugin_dir / item for item in listed if isinstance(item, str)]
    return [path for path in paths if path.exists()]


def _markdown(path: Path) -> Iterator[Path]:
    if path.is_file():
        if path.suffix == ".md":
            yield path
        return
    yield from files_ending(path, ".md")


def slash_commands(template: Template) -> list[tuple[str, str]]:
    """(plugin, command) for each literal `/PLUGIN:command` in a template."""
    text = "".join("{}" if is_name else value for is_name, value in template.pieces)
    found = []
    for match in _SLASH_COMMAND.finditer(text):
        command = match.group(2).rstrip(".,;:)")
        if "{" not in command and "{" not in match.group(1):  # a placeholder: not known yet
            found.append((match.group(1), command))
    return found


def check_prompts(
    prompts: Iterable[Template], plugin: str, commands: tuple[str, ...], problems: Problems
) -> None:
    """Each prompt's slash commands name `plugin` and one of `commands`."""
    valid = ", ".join(f"/{plugin}:{name}" for name in commands) or "none: it has no commands"
    for prompt in prompts:
        for name, command in slash_commands(prompt):
            if name != plugin:
                problems.report(
                    prompt.error(
                        f"/{name}:{command} names plugin {name!r}, but the suite's plugin "
                        f"is {plugin!r}",
                        hint=f"valid: {valid}",
                    )
                )
            elif command not in commands:
                problems.report(
                    prompt.error(
                        f"/{name}:{command}: the plugin has no command {command!r}",
                        hint=f"valid: {valid}",
                    )
                )


def check_reviewer_agent(
    agent: LocatedNode, plugin_dir: Path, agents: tuple[str, ...], problems: Problems
) -> None:
    """A reviewer's `agent:` names a file in the plugin; if not, list its agent files.

    The reviewer reads its agent file as instructions (`Read {plugin}/agents/...`),
    so any file inside the plugin will do; the list is what is most likely meant.
    """
    name = agent.as_str()
    if Path(name).is_absolute() or ".." in Path(name).parts:
        problems.report(agent.error("must be a path inside the plugin folder"))
    elif not (plugin_dir / name).is_file():
        valid = ", ".join(agents) or "none: the plugin has no agents/ folder"
        problems.report(
            agent.error(
                f"the plugin has no agent file {name!r}",
                hint=f"relative to the plugin folder; its agents: {valid}",
            )
        )
