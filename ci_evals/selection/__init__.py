"""Which stages a change can affect, and whether every plugin file is covered.

The hot path: `compute-stage` and the pre-commit hook import only this package,
`ci_evals.config`, `ci_evals.git` and `ci_evals.errors` (no pydantic, no agent
SDK; `tests/test_core_install.py` keeps it so).

- `stage_map` — loads `stage_map.yaml` into frozen records; `map_cache` keeps it;
- `matcher` — `GlobMatcher`: every glob that matches a path, indexed per folder
  (`folder_index`, `name_rules`), ranked (`ranking`, `bounded_search`);
- `glob_syntax` — what a glob means, and why one is refused (`glob_problem`);
- `decide` — the decision over changed paths (pure, no git);
- `diff` — the git half: BASE...HEAD, shallow clones, the streamed diff;
- `coverage` — `check-coverage`: files no entry covers, entries matching nothing.
"""
