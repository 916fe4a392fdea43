"""`ci-evals.yaml`: the suite (plugin, fixtures, stages, scenarios, limits, graders)
loaded and validated once into frozen records (`load`); see docs/suite.md."""
