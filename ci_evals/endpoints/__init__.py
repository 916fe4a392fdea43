"""What agents talk to: the model endpoints behind one seam (`base`, `registry`).

- `anthropic` — the real API through `proxy.ForwardingProxy`, which holds the
  key (the agent gets a per-run token), enforces the hard budget from the usage
  it forwards (`pricing`), retries 429/529 and can record every exchange;
- `stub` — `stub:PATH`, the stub model (`stub_model`) serving a script offline;
- `replay` — `replay:RUN_DIR`, a run's recorded exchanges (`--record`) served
  back by normalised request key, offline and free.
"""
