"""Other tools' result documents, both ways: `claude plugin eval`'s aggregate-result.json.

- `plugin_eval_doc` — the document read strictly as hostile input: capped, typed,
  and checked to agree with itself, every mistake one line naming its JSON path;
- `plugin_eval_import` — a document as a ci-evals run (`results.json`), failing
  closed where the CLI does not (an errored run, skipped paid graders, a partial
  document);
- `plugin_eval_export` — a ci-evals run as a document of the CLI's schema.

Above `results` (the models it writes and reads, and `results.verdict`, where
a verdict is evaluated), beside `report`: `commands` call it.
"""
