"""The topic sweep: when a tenant excludes a topic later (`PUT /v1/settings` adding it to
`extraction.exclude_topics`), what is already stored under it goes (docs/design.md §2).

Memories whose stored `topic` is excluded leave through the deletion path of
`DELETE /v1/memories/{memory_id}` (`memwrite.edit.delete`): one commit each, conditioned on
what was read, so the index follows from the deletion's outbox row and the change feed says
`memory.deleted` for each, and a value one of them had superseded is current again. Episodes
whose words the topic's vocabulary marks (`memwrite.topics.matcher.marked_topic`, the tenant's own
terms included) are deleted with an outbox row each, from which stage 7 takes their documents
out of the index (as for an expired episode); the documents are also deleted right after.

It runs in the background (`TopicSweeps`: on AWS an asynchronous invocation of the expire
function, locally in the request), never on a request's critical path on DynamoDB: it reads
the tenant's users (`TopicSweepStore.users_of`, a keys-only scan there: docs/reference/api.md says
the cost), then per user one query of memories and pages of episodes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import BaseModel

from memwrite.config.settings import PipelineConfig
from memwrite.edit.delete import DeleteDeps, delete_memory
from memwrite.edit.ports import TOPIC_SWEEP_EVENT, TopicSweep, TopicSweepStore
from memwrite.errors import IndexUnavailable, UnknownMemory
from memwrite.ports import EpisodeStore
from memwrite.records.episode import Episode, episode_doc_id, search_text
from memwrite.tenants import TenantConfigs
from memwrite.topics.matcher import marked_topic

__all__ = [
    "EPISODE_PAGE",
    "TOPIC_SWEEP_EVENT",
    "InlineTopicSweeps",
    "TopicSweep",
    "TopicSweepDeps",
    "TopicSweepReport",
    "added_topics",
    "sweep_topics",
]

logger = logging.getLogger(__name__)

EPISODE_PAGE = 200  # episodes read per query while sweeping one user


class TopicSweepReport(BaseModel):
    """What a sweep removed: memories (each announced `memory.deleted`), episodes."""

    tenant: str
    topics: list[str]
    users: int = 0
    memories_deleted: int = 0
    episodes_deleted: int = 0


@dataclass
class TopicSweepDeps:
    sweeps: TopicSweepStore
    episodes: EpisodeStore
    delete: DeleteDeps


def added_topics(before: frozenset[str] | None, after: frozenset[str] | None) -> frozenset[str]:
    """The topics a settings change newly excludes (what a sweep has to remove)."""
    return frozenset(after or ()) - frozenset(before or ())


def _marked_episodes(
    tenant: str,
    user_id: str,
    *,
    topics: frozenset[str],
    terms: Mapping[str, Sequence[str]],
    deps: TopicSweepDeps,
    now: datetime,
) -> list[Episode]:
    marked: list[Episode] = []
    cursor: str | None = None
    while True:
        page = deps.episodes.episodes_of(
            tenant,
            user_id,
            status=None,
            since=None,
            until=None,
            limit=EPISODE_PAGE,
            cursor=cursor,
            now=now.timestamp(),
        )
        # Its search text: the turn it replies to is in its document too.
        marked += [e for e in page.episodes if marked_topic(search_text(e.turn), topics, terms)]
        cursor = page.next_cursor
        if cursor is None:
            return marked


def sweep_topics(
    sweep: TopicSweep, config: PipelineConfig, deps: TopicSweepDeps
) -> TopicSweepReport:
    """Remove every memory of `sweep.topics` and every episode their vocabulary marks, of every
    user of the tenant; `config` is the tenant's (its own topic terms apply)."""
    topics = frozenset(sweep.topics)
    report = TopicSweepReport(tenant=sweep.tenant, topics=sorted(topics))
    now = datetime.now(UTC)
    for user_id in deps.sweeps.users_of(sweep.tenant):
        report.users += 1
        for memory in deps.delete.store.memories_of(sweep.tenant, user_id):
            if memory.topic not in topics:
                continue
            try:
                delete_memory(sweep.tenant, memory.memory_id, config, deps.delete)
            except UnknownMemory:
                continue  # deleted meanwhile (by its id, a rollback, an erasure)
            report.memories_deleted += 1
        marked = _marked_episodes(
            sweep.tenant,
            user_id,
            topics=topics,
            terms=config.extract.topic_terms,
            deps=deps,
            now=now,
        )
        if not marked:
            continue
        report.episodes_deleted += deps.sweeps.remove_episodes(marked)
        for episode in marked:
            try:
                deps.delete.index.delete(sweep.tenant, user_id, episode_doc_id(episode.turn_id))
            except IndexUnavailable:
                logger.warning("index unavailable; stage 7 removes the episode's document")
    logger.info("topic sweep done", extra=report.model_dump())
    return report


class InlineTopicSweeps:
    """`TopicSweeps` where the deployment has no function for it (`memwrite serve`, the local
    runtimes): the sweep runs in the settings request, which a local tenant's size allows."""

    def __init__(self, configs: TenantConfigs, deps: Callable[[], TopicSweepDeps]) -> None:
        self._configs = configs
        self._deps = deps

    def start(self, sweep: TopicSweep) -> None:
        sweep_topics(sweep, self._configs.for_request(sweep.tenant), self._deps())
