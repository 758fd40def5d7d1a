"""What the model is asked about a batch: its turns as the prompt shows them, the session's
earlier turns as context, and the prompts themselves. The extract stage reads the first two;
the batch lane (`memwrite.backfill.batch`) submits `batch_prompts` ahead of time, so a batched
request is the very one a live extraction of the same turns sends."""

from __future__ import annotations

from collections.abc import Sequence

from memwrite.config.settings import ExtractConfig
from memwrite.extract.candidates import model_prompts
from memwrite.models import QueuedTurn, session_sort_key
from memwrite.ports import SessionLog
from memwrite.prompts import RenderedPrompt
from memwrite.prompts.extract import BatchTurn, SessionTurn

__all__ = ["batch_prompts", "batch_turns", "session_context"]


def batch_turns(ordered: Sequence[QueuedTurn]) -> list[BatchTurn]:
    """The batch's turns (in session order) as the prompt shows them."""
    return [
        BatchTurn(
            turn_id=t.turn_id,
            role=t.role,
            text=t.text,
            timestamp=t.observed_at,
            in_reply_to=t.context,
        )
        for t in ordered
    ]


def session_context(
    turns: Sequence[QueuedTurn], config: ExtractConfig, log: SessionLog, now: float
) -> list[SessionTurn]:
    """The session's turns logged before the batch's first (up to `max_source_turns`)."""
    first = turns[0]
    earlier = log.recent(
        first.tenant,
        first.user_id,
        first.session_id,
        session_sort_key(first),
        config.max_source_turns,
        now=now,
    )
    return [SessionTurn(role=t.role, text=t.text, timestamp=t.observed_at) for t in earlier]


def batch_prompts(
    turns: Sequence[QueuedTurn], config: ExtractConfig, log: SessionLog, now: float
) -> list[RenderedPrompt]:
    """The model requests the extract stage sends for these turns (of one session, no direct
    memories) with the same session context; none when the rules handle every turn."""
    ordered = sorted({turn.turn_id: turn for turn in turns}.values(), key=session_sort_key)
    return model_prompts(batch_turns(ordered), session_context(ordered, config, log, now), config)
