"""Deploy-time step of the search collection (a CloudFormation custom resource through CDK's
provider framework, `infra/search.py`): create the hybrid search pipeline and the index the
OpenSearch adapter expects (`memwrite.adapters.aws.opensearch_index.index_body`/`pipeline_body`).

- Create and Update: `ensure_index`, idempotent (the pipeline is re-put, an existing index and
  its documents are kept; a changed vector dimension needs a new index name).
- Delete: nothing. The documents are the memories' search copy; the collection's removal
  policy decides whether they go with the stack (a stack update that renames the index sends
  a Delete for the old one: it must not drop it).

A new collection's data access policy can take a minute to apply: a refused call is retried
a few times before the deploy fails.
"""

from __future__ import annotations

import time
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from memwrite.errors import IndexUnavailable
from memwrite.wiring import build_index_setup

__all__ = ["ATTEMPTS", "on_event"]

logger = Logger(service="memwrite-index-setup")
ATTEMPTS = 6
RETRY_SECS = 15.0


@logger.inject_lambda_context(clear_state=True)
def on_event(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = event["RequestType"]
    if request == "Delete":
        return {"PhysicalResourceId": event["PhysicalResourceId"]}
    setup = build_index_setup()
    for attempt in range(1, ATTEMPTS + 1):
        try:
            setup.index.ensure_index(setup.fusion)
            break
        except IndexUnavailable:
            if attempt == ATTEMPTS:
                raise
            logger.warning("index setup refused; retrying", attempt=attempt)
            time.sleep(RETRY_SECS)
    logger.info("index ready", request=request, index=setup.index_name)
    return {"PhysicalResourceId": setup.index_name, "Data": {"IndexName": setup.index_name}}
