"""memwrite: an agent memory write pipeline for AWS serverless.

The library behind every Lambda handler and the local runner. Stages are modules named after
their verb (`prefilter`, later `extract`, `dedupe`, ...); `stages.STAGES` orders them.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
