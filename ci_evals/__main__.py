from ci_evals.main import entry

entry()
