"""The `loop` agent: a bounded tool loop over the Messages API, one package.

`kind` is what the registry loads (the `agent: {kind: loop, ...}` block, read
by `config`) and imports nothing heavy; `agent` (`LoopAgent`: the `anthropic`
client, and why not the SDK) loads only when a stage runs, with `tools` (what
each tool call runs in the sandbox) and `context` (the context strategies).
Nothing outside this package imports it: the core reaches it by its registry
entry.
"""
