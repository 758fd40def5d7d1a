"""Local tooling around the memwrite library: the CLI, moto as in-process AWS, the runner that
drives the real Lambda handlers, `memwrite serve` and the funnel printer.

Not part of the Lambda layer: the layer holds `layers/core/memwrite` only. This package may
import `functions/` (it plays API Gateway, SQS and Step Functions for them); the library never
does.
"""
