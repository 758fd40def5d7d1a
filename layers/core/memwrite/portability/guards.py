"""The guards an import passes besides its format (docs/design.md §13): the API's own.

Every text of a line (a memory's text, value, entity and questions; an episode's words and the
question it answered; an entity's names; an entity_facts row's values) goes through the same
secrets firewall as `POST /v1/turns`: a secret, or PII the tenant does not allow, refuses the
line (`ImportRejected` naming the line, the field and the kind), since the API would never have
stored it. Every field gets the bounds the API's writes have: a memory's scores in [0, 1], its
text, value, attribute and topic as long as a direct write's, an episode's words as long as a
turn's (`pipeline.ingest.max_chars_per_turn`). A memory of a topic the tenant excludes, or an
episode that topic's vocabulary marks, is refused too: it would never have been kept. A line
longer than `max_import_line_bytes` is refused as soon as it is read, before it is parsed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memwrite.config.settings import PipelineConfig
from memwrite.direct_memories.model import MAX_ATTRIBUTE_CHARS, MAX_TEXT_CHARS, MAX_VALUE_CHARS
from memwrite.errors import ImportRejected
from memwrite.portability.format import (
    EntityFactLine,
    EntityLine,
    EpisodeLine,
    ExportLine,
    MemoryLine,
)
from memwrite.pre_filter.firewall import normalise, scan
from memwrite.reasons import SecretKind
from memwrite.records.episode import search_text
from memwrite.topics.matcher import marked_topic

__all__ = ["ImportGuards", "read_lines"]

_TOPIC_CHARS = 64
_MAX_QUESTIONS = 10
_MAX_ALIASES = 200
_Question = Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)]


class _MemoryBounds(BaseModel):
    """A stored memory's fields with the bounds the API writes them within."""

    model_config = ConfigDict(extra="ignore")

    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    topic: str = Field(min_length=1, max_length=_TOPIC_CHARS, pattern=r"^[^\r\n]+$")
    entity: str = Field(min_length=1, max_length=MAX_VALUE_CHARS)
    attribute: str = Field(
        min_length=1, max_length=MAX_ATTRIBUTE_CHARS, pattern=r"^[a-z][a-z0-9_]*$"
    )
    value: str = Field(min_length=1, max_length=MAX_VALUE_CHARS)
    importance: float = Field(ge=0, le=1)
    confidence: float = Field(ge=0, le=1)
    extractor_confidence: float = Field(ge=0, le=1)
    corroboration: int = Field(ge=1)
    search_questions: list[_Question] = Field(max_length=_MAX_QUESTIONS)


@dataclass(frozen=True)
class ImportGuards:
    """The deployment's (and the tenant's) limits an import is held to."""

    allowed_pii: frozenset[SecretKind]
    max_chars_per_turn: int
    max_line_bytes: int
    exclude_topics: frozenset[str] = frozenset()
    topic_terms: Mapping[str, Sequence[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, config: PipelineConfig) -> ImportGuards:
        """The guards of a request's effective config (the tenant's PII allowances)."""
        return cls(
            allowed_pii=config.pre_filter.allowed_pii,
            max_chars_per_turn=config.ingest.max_chars_per_turn,
            max_line_bytes=config.ingest.max_import_line_bytes,
            exclude_topics=config.extract.exclude_topics,
            topic_terms=config.extract.topic_terms,
        )

    def check_size(self, number: int, line: str) -> None:
        if len(line.encode("utf-8")) > self.max_line_bytes:
            raise ImportRejected(number, "line", f"over {self.max_line_bytes} bytes")

    def check(self, number: int, record: ExportLine) -> None:
        """Refuse the line (`ImportRejected`) that the API would not have stored."""
        if isinstance(record, MemoryLine):
            self._bounds(number, record)
            if record.memory.topic in self.exclude_topics:
                raise ImportRejected(number, "memory.topic", "a topic the tenant excludes")
        elif isinstance(record, EpisodeLine):
            turn = record.episode.turn
            words = f"{turn.context or ''}\n{search_text(turn)}"
            if topic := marked_topic(words, self.exclude_topics, self.topic_terms):
                where = f"of a topic the tenant excludes ({topic})"
                raise ImportRejected(number, "episode.turn.text", where)
            for field, text in _texts(record):
                if len(text) > self.max_chars_per_turn:
                    where = f"at most {self.max_chars_per_turn} characters"
                    raise ImportRejected(number, field, where)
        if isinstance(record, EntityLine) and len(record.entity.aliases) > _MAX_ALIASES:
            raise ImportRejected(number, "entity.aliases", f"at most {_MAX_ALIASES}")
        for field, text in _texts(record):
            found = [f.kind for f in scan(normalise(text)) if f.kind not in self.allowed_pii]
            if found:
                kind = found[0].value
                raise ImportRejected(
                    number, field, f"holds a secret ({kind}): refused, as POST /v1/turns is"
                )

    @staticmethod
    def _bounds(number: int, record: MemoryLine) -> None:
        try:
            _MemoryBounds.model_validate(record.memory.model_dump())
        except ValidationError as exc:
            first = exc.errors()[0]
            path = ".".join(str(part) for part in first.get("loc", ()))
            raise ImportRejected(number, f"memory.{path}", str(first.get("msg"))) from None


def _texts(record: ExportLine) -> Iterator[tuple[str, str]]:
    """(field, text) of every free text of a line."""
    if isinstance(record, MemoryLine):
        memory = record.memory
        yield from (
            ("memory.text", memory.text),
            ("memory.value", memory.value),
            ("memory.entity", memory.entity),
        )
        for index, question in enumerate(memory.search_questions):
            yield f"memory.search_questions[{index}]", question
    elif isinstance(record, EpisodeLine):
        turn = record.episode.turn
        yield "episode.turn.text", turn.text
        if turn.context is not None:
            yield "episode.turn.context", turn.context
        if turn.preceding is not None:
            yield "episode.turn.preceding", turn.preceding
    elif isinstance(record, EntityLine):
        yield "entity.name", record.entity.name
        for index, alias in enumerate(record.entity.aliases):
            yield f"entity.aliases[{index}]", alias
    elif isinstance(record, EntityFactLine):
        for memory_id, fact in record.facts.items():
            yield f"facts.{memory_id}.value", fact.value


def read_lines(stream: IO[bytes], max_line_bytes: int) -> Iterator[str]:
    """An import's lines from a byte stream, one at a time (bounded memory): a line longer
    than `max_line_bytes` is refused as soon as that many bytes are read, unparsed."""
    number = 0
    while raw := stream.readline(max_line_bytes + 1):
        number += 1
        content = raw.removesuffix(b"\n")
        if len(content) > max_line_bytes:
            raise ImportRejected(number, "line", f"over {max_line_bytes} bytes")
        try:
            yield content.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ImportRejected(number, "line", f"not UTF-8 ({exc.reason})") from None
