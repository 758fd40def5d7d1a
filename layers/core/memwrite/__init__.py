"""memwrite: an agent memory write pipeline for AWS serverless.

The library behind every Lambda handler and the local runner (the Lambda layer). Each stage is
one package (`pre_filter`, `extract`, `resolve_refs`, `dedupe`, `conflict`, `persist`, `hype`);
`stages.STAGES` orders them, `ports` holds every Protocol the adapters implement, `errors`
every exception.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
