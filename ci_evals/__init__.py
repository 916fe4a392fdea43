"""ci-evals: evaluate phased AI agents in CI.

Only the stages a change can affect are run; the files they produce are graded.
Heavy modules (the agent SDK, docker, HTTP) are imported lazily by the commands
that need them, never here: the pre-commit hook and `compute-stage` import this
package on every commit and every pull request.
"""

__version__ = "0.1.0"
