"""Entities: the people, places and things a user talks about, and how one is saved.

An entity's id is content-addressed from its normalised canonical name (docs/design.md §11),
so the same name resolved in two batches, or re-resolved after a redelivery, is the same row.
The user themself is the entity named "user". Aliases only ever accumulate: a surface form
seen once ("Pri", "Mr. Patel", "my sister") keeps pointing at its entity.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from memwrite.claims.candidate import USER_ENTITY
from memwrite.ids import content_hash

__all__ = [
    "Entity",
    "EntityKind",
    "VersionedEntity",
    "entity_id_for",
    "merge_entities",
    "normalise_name",
]

_WHITESPACE_RE = re.compile(r"\s+")
# Punctuation around a name is layout, not identity: "Priya." and "Priya" are one entity.
_EDGE_PUNCTUATION = " \t\n.,;:!?\"'“”‘’()[]{}"


class EntityKind(StrEnum):
    PERSON = "person"
    PLACE = "place"
    ORGANIZATION = "organization"
    PET = "pet"
    THING = "thing"
    OTHER = "other"  # not known yet; a later mention may say what it is
    USER = "user"  # the speaker


def normalise_name(name: str) -> str:
    """Case-folded, whitespace-collapsed, edge punctuation stripped: the identity of a name."""
    return _WHITESPACE_RE.sub(" ", name).strip(_EDGE_PUNCTUATION).casefold()


def entity_id_for(tenant: str, user_id: str, name: str) -> str:
    """Stable id of the user's entity called `name`; the user is `entity_id_for(.., "user")`."""
    return content_hash("entity", tenant, user_id, normalise_name(name))


class Entity(BaseModel):
    """One entity of one user: its canonical name, what it is, and every alias seen."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)

    entity_id: str = Field(min_length=1)
    tenant: str = Field(min_length=1)
    user_id: str = Field(min_length=1)
    name: str = Field(min_length=1, description="The canonical name; the id derives from it.")
    kind: EntityKind
    aliases: tuple[str, ...] = Field(
        default=(), description="Other surface forms, first-seen order, no case duplicates."
    )
    created_at: datetime
    last_seen: datetime

    @classmethod
    def create(
        cls,
        tenant: str,
        user_id: str,
        name: str,
        *,
        kind: EntityKind,
        at: datetime,
        aliases: Iterable[str] = (),
    ) -> Entity:
        """A new entity with its content-addressed id, first seen at `at`."""
        return cls(
            entity_id=entity_id_for(tenant, user_id, name),
            tenant=tenant,
            user_id=user_id,
            name=name,
            kind=kind,
            aliases=_union((), aliases, name),
            created_at=at,
            last_seen=at,
        )

    @property
    def is_user(self) -> bool:
        return self.kind is EntityKind.USER or normalise_name(self.name) == USER_ENTITY


def _union(existing: Iterable[str], added: Iterable[str], name: str) -> tuple[str, ...]:
    """Aliases in first-seen order; one per normalised form, never the name itself."""
    seen = {normalise_name(name)}
    merged: list[str] = []
    for alias in (*existing, *added):
        key = normalise_name(alias)
        if key and key not in seen:
            seen.add(key)
            merged.append(alias.strip())
    return tuple(merged)


def merge_entities(existing: Entity, incoming: Entity) -> Entity:
    """What an upsert stores: aliases unioned, first and last sighting widened, and a kind
    that was still `other` replaced by a known one. Order-insensitive, so redelivery is a
    no-op."""
    if existing.entity_id != incoming.entity_id:
        raise ValueError(f"cannot merge {existing.entity_id} into {incoming.entity_id}")
    kind = existing.kind if existing.kind is not EntityKind.OTHER else incoming.kind
    return existing.model_copy(
        update={
            "kind": kind,
            "aliases": _union(existing.aliases, incoming.aliases, existing.name),
            "created_at": min(existing.created_at, incoming.created_at),
            "last_seen": max(existing.last_seen, incoming.last_seen),
        }
    )


@dataclass(frozen=True)
class VersionedEntity:
    entity: Entity
    version: int  # bumps on every write; a put names the version it read
