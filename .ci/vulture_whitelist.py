"""What vulture (the dead-code check in .ci/run, `[tool.vulture]` in pyproject.toml)
reports but is alive: each name is used by something vulture cannot see.

vulture matches by name: an attribute access here marks every definition of that
name as used. Each entry says who uses it; a name that is dead is removed from the
code, not added here. Read from the `paths` vulture checks (this file is in one).
"""

from vulture.whitelist_utils import Whitelist

_ = Whitelist()

# -- Reached by a registry's "module:attr" string (ci_evals.registry), imported on
# first use: the sandbox, agent, endpoint and grader kinds.
_.KIND

# -- Called by the standard library, which looks them up on our subclasses.
# http.server / socketserver: the local HTTP servers' handlers and servers.
_.do_GET
_.do_HEAD
_.do_POST
_.log_message  # BaseHTTPRequestHandler logs every request through it (to stderr)
_.protocol_version  # HTTP/1.1: keep-alive
_.disable_nagle_algorithm  # StreamRequestHandler.setup sets TCP_NODELAY on it
_.close_connection  # the handler's loop ends the connection when it is set
_.daemon_threads  # ThreadingMixIn: request threads do not hold the process open
_.block_on_close  # ThreadingMixIn: server_close does not join request threads
_.process_request  # socketserver calls it per accepted connection (the proxy's threads)
# urllib.request.HTTPRedirectHandler.redirect_request, and the parameters of
# its signature (github/comment.py refuses every redirect).
_.redirect_request
_.req
_.fp
_.newurl
# argparse.Action.__call__'s parameters (main.py's `--version`).
_.namespace
_.option_string
# __exit__'s parameters (the context-manager protocol).
_.exc_type
_.tb
# tarfile.TarInfo fields, read by tarfile when it writes the member (the docker
# sandbox's put_archive and the image build's layers).
_.mtime
_.gname

# -- Read by the Claude Agent SDK: agents/claude.py's transport subclasses the
# SDK's SubprocessCLITransport, whose own methods read these attributes and call
# read_messages; permission_mode is an SDK option the CLI receives as a flag.
_._stdout_stream
_._stdin_stream
_._ready
_.read_messages
_.permission_mode

# -- Pydantic: model_config is read by pydantic's metaclass; the fields are
# written to results.json by model_dump (the schema in docs/, tests/data/).
_.model_config
_.schema_version  # results: an imported claude plugin eval document's version
_.resource_limits  # results: what bounded each sandbox's processes
_.rubric_sha256  # results: the reviewer rubric a criterion was graded by

# -- Fields of records written or read as documents.
_.artifact_id  # github/artifacts.py: the baseline's source file (dataclasses.asdict)
# Keys of the documents `claude plugin eval` reads and writes, read and type-checked
# as the CLI's schema has them, and kept on the record (case.yaml, the eval
# document's runs).
_.expected_outcome
_.trace_path

# -- The Python API docs/grading.md lists for users' own graders.
_.read_tool_uses

# -- The proxy's and the ledger's counters: what the proxy refused and charged,
# read by tests/endpoints/test_proxy.py to tell the cases apart from outside the
# process's own code (the cost assertions alone cannot tell a refusal from a
# request that was never sent).
_.budget_refusals
_.budget_exhausted
_.input_only
