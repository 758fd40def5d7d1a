"""The batch lane over the Message Batches API (`memwrite.backfill.ports.ModelBatches`).

`client.messages.batches.create` takes the requests, each the very Messages API request a live
extraction sends (`StructuredClient.request`: model, max_tokens, system, messages and the
structured output format) under its `custom_id`; the listing (`GET /v1/messages/batches`) says,
for every open batch at once, when its processing has `ended` (`retrieve`, for one): requested
and read raw, a page the size of the open batches, since only each batch's id and status matter
(`states`);
`results` streams the JSONL of per-request results: `succeeded` (the message, validated as a
live answer is and priced at `price_factor` of the list price), `errored`, `expired` or
`canceled`. An expired or canceled batch still ends: its requests come back as such.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Unpack

from memwrite.adapters.anthropic.client import ClientOptions, StructuredClient, api_error
from memwrite.backfill.ports import BatchAnswer, BatchRequest, BatchState
from memwrite.config.settings import ExtractConfig
from memwrite.errors import MalformedLlmOutput
from memwrite.model_ports import LlmCall
from memwrite.prompts.extract import ExtractionResult

if TYPE_CHECKING:
    from anthropic import Anthropic
    from anthropic.types.messages import MessageBatch, MessageBatchIndividualResponse
    from anthropic.types.messages.batch_create_params import Request

__all__ = ["AnthropicMessageBatches"]

# The listing's first page holds the open batches and this many more (batches another worker
# or application made since), at most the API's 1,000; a busy workspace's next pages hold
# `_LIST_PAGE`.
_LIST_SLACK = 10
_MAX_LIST_PAGE = 1_000
_LIST_PAGE = 100
# Batches a round lists at most: open batches are recent, so they are on the first pages.
_MAX_LISTED = 500
_LIST_PATH = "/v1/messages/batches"


def _state(processing_status: str) -> BatchState:
    # "canceling" is still in progress; an expired or canceled batch ends as well.
    return BatchState.ENDED if processing_status == "ended" else BatchState.IN_PROGRESS


def _state_of(batch: MessageBatch) -> BatchState:
    return _state(batch.processing_status)


class AnthropicMessageBatches:
    """`ModelBatches` over the Anthropic API's Message Batches (the provider `anthropic`)."""

    def __init__(
        self, config: ExtractConfig, *, price_factor: float, **options: Unpack[ClientOptions]
    ) -> None:
        # The very request a live extraction sends (`AnthropicExtractorClient`'s).
        self._client = StructuredClient(
            config,
            ExtractionResult,
            max_tokens=config.max_output_tokens,
            bare_schema=True,
            **options,
        )
        self._price_factor = price_factor

    @property
    def min_requests(self) -> int:
        return 1

    def _sdk(self) -> Anthropic:
        import anthropic

        sdk = self._client.sdk
        assert isinstance(sdk, anthropic.Anthropic), "Message Batches: the Anthropic API only"
        return sdk

    def submit(self, model: str, requests: Sequence[BatchRequest]) -> str:
        import anthropic

        params: list[Request] = [
            {
                "custom_id": request.custom_id,
                "params": self._client.request(
                    request.prompt.system, request.prompt.messages, model=request.model
                ),
            }
            for request in requests
        ]
        try:
            batch = self._sdk().messages.batches.create(requests=params)
        except anthropic.AnthropicError as exc:
            raise api_error(exc) from exc
        return batch.id

    def state(self, batch_id: str) -> BatchState:
        import anthropic

        try:
            batch = self._sdk().messages.batches.retrieve(batch_id)
        except anthropic.AnthropicError as exc:
            raise api_error(exc) from exc
        return _state_of(batch)

    def states(self, batch_ids: Sequence[str]) -> dict[str, BatchState]:
        """From the workspace's listing of batches (newest first), read until every one is
        found and for at most `_MAX_LISTED` batches: one request a round instead of one per
        open batch, and never the workspace's whole history for a batch the listing does not
        show (that one is retrieved on its own). Open batches are the newest, so the first page
        holds as many as are open (and `_LIST_SLACK` more), not a fixed hundred of which most
        have ended; each is read raw for its id and status, not built into a `MessageBatch`."""
        import anthropic
        import httpx2

        wanted = set(batch_ids)
        found: dict[str, BatchState] = {}
        if not wanted:
            return found
        query: dict[str, str | int] = {"limit": min(_MAX_LIST_PAGE, len(wanted) + _LIST_SLACK)}
        listed = 0
        try:
            while len(found) < len(wanted) and listed < _MAX_LISTED:
                # The listing's endpoint requested as is (`messages.batches.list` builds the
                # pydantic class of its page, `SyncPage[MessageBatch]`, anew at each call).
                listing = self._sdk().get(
                    _LIST_PATH, cast_to=httpx2.Response, options={"params": query}
                )
                page: dict[str, Any] = json.loads(listing.content)
                batches = page["data"]
                listed += len(batches)
                found.update(
                    (b["id"], _state(b["processing_status"])) for b in batches if b["id"] in wanted
                )
                if not page["has_more"] or not batches:
                    break
                query = {"limit": _LIST_PAGE, "after_id": page["last_id"]}
        except anthropic.AnthropicError as exc:
            raise api_error(exc) from exc
        return {batch_id: found.get(batch_id) or self.state(batch_id) for batch_id in batch_ids}

    def answers(self, batch_id: str) -> list[BatchAnswer]:
        import anthropic

        try:
            return [self._answer(line) for line in self._sdk().messages.batches.results(batch_id)]
        except anthropic.AnthropicError as exc:
            raise api_error(exc) from exc

    def _answer(self, line: MessageBatchIndividualResponse) -> BatchAnswer:
        result = line.result
        if result.type == "errored":
            error = f"errored: {result.error.error.type}"
            return BatchAnswer(custom_id=line.custom_id, call=None, error=error)
        if result.type != "succeeded":  # expired, canceled
            return BatchAnswer(custom_id=line.custom_id, call=None, error=result.type)
        message = result.message
        try:
            parsed, usage = self._client.answer(
                message, model=message.model, price_factor=self._price_factor
            )
        except MalformedLlmOutput as exc:
            return BatchAnswer(line.custom_id, None, error=type(exc).__name__, usage=exc.usage)
        return BatchAnswer(custom_id=line.custom_id, call=LlmCall(result=parsed, usage=usage))
