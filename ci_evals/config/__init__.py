"""Reading configuration files: YAML that keeps every value's file, line and
column (`yaml_source`), and the prompt templates (`templates`).

The loaders of `stage_map.yaml` (`ci_evals.selection.stage_map`) and of
`ci-evals.yaml` (`ci_evals.suite`) build on these, so every mistake in any
config file is reported the same way: `file:line:col: field: problem (hint)`.
"""
