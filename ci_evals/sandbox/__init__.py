"""Where agent and grader processes run: the Sandbox Protocol, its registry and backends."""
