"""Local tooling around the memwrite library, in three packages and one generator.

- `cli/`: the `memwrite` command, one module per command (`memwrite_local.cli:main`).
- `runtime/`: the real Lambda handlers driven in-process on SQLite or moto (the runner plays
  API Gateway, SQS and Step Functions), and `memwrite serve`'s HTTP server.
- `evaluation/`: `memwrite eval`, data sets through the local pipeline, scored.
- `config_docs.py`: generates `docs/reference/configuration.md` from the config models
  (`make config-docs`).

Not part of the Lambda layer: the layer holds `layers/core/memwrite` only. This package may
import `functions/` (the runtime plays API Gateway, SQS and Step Functions for them); the
library never does.
"""
