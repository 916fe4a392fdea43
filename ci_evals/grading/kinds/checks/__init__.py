"""The `checks` grader kind: deterministic facts about the files a stage left, and
what it called.

No model is involved. Each check becomes one checklist criterion (source
`check`), so a report shows checks and reviewer scores side by side; a check
names its kind by one key (docs/grading.md#checks has the table and examples).

Each kind is one class in the module named by its key (`files`, `headings`,
`front_matter`, `json_schema`, `equals_length`, `trajectory`): its keys with
their JSON Schema, how it loads, how it runs (the `CheckKind` and `Check`
Protocols of `base`). `registry` names them; `load` reads a stage's list
through it, `run` runs the loaded checks, `grader` is the kind the grader
registry loads. Adding a check is a class and its line in `registry`
(docs/grading.md#adding-a-check).

Loading is cheap and gives file:line errors; running imports jsonschema and
pydantic only when called (the fixtures' contract hook runs `run.check_outcomes`,
which needs no pydantic).
"""
