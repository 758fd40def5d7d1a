"""Pronoun and grammar rules of resolve_refs: what a candidate's entity field says before any
lookup (the user, a pronoun, a relation such as "my sister", a name), and which pronouns fit which
entity. Pure and cached; the cascade in `references.py` decides with them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Final

from rapidfuzz import utils

from memwrite.claims.entities import Entity, EntityKind, normalise_name
from memwrite.claims.relations import RELATION_SYNONYMS

# Names and aliases are re-read for every claim of a batch; their parsing is cached per process.
_PARSE_CACHE_SIZE: Final = 4_096

_SELF_WORDS: Final = frozenset(
    # "we" is the user's own group: the rule extractor files "we decided" under the user too.
    {"user", "the user", "i", "me", "my", "mine", "myself", "we", "us", "our", "ourselves"}
)
_SHE: Final = frozenset({"she", "her", "hers", "herself"})
_HE: Final = frozenset({"he", "him", "his", "himself"})
_THEY: Final = frozenset({"they", "them", "their", "theirs", "themselves", "themself"})
_IT: Final = frozenset({"it", "its", "itself"})
POSSESSIVE_PRONOUNS: Final = frozenset({"his", "hers", "their", "theirs", "its"})
# References that point without naming: they are never a new entity.
_VAGUE_WORDS: Final = frozenset(
    {
        "this",
        "that",
        "these",
        "those",
        "someone",
        "somebody",
        "something",
        "everyone",
        "everybody",
        "anyone",
        "anybody",
        "one",
        "here",
        "there",
        "he or she",
        "him or her",
    }
)
_DETERMINERS_RE: Final = re.compile(r"^(?:the|this|that|these|those|a|an)\s")
_POSSESSIVE_RE: Final = re.compile(r"^(?:my|the user['’]s|user['’]s)\s+(?P<noun>\S.*)$")
_HONORIFICS: Final = frozenset({"mr", "mrs", "ms", "miss", "mx", "dr", "prof", "sir", "madam"})

# Modifiers that do not change who is meant: "my older sister" is "my sister".
_DROPPED_MODIFIERS: Final = frozenset(
    {"older", "younger", "little", "big", "baby", "twin", "eldest", "oldest", "youngest", "new"}
)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_FEMALE_RELATIONS: Final = _words(
    "sister mother wife girlfriend daughter aunt niece grandmother granddaughter stepmom "
    "stepmother stepdaughter stepsister godmother goddaughter"
)
_MALE_RELATIONS: Final = _words(
    "brother father husband boyfriend son uncle nephew grandfather grandson stepdad "
    "stepfather stepson stepbrother godfather godson"
)
_NEUTRAL_RELATIONS: Final = _words(
    "spouse partner fiance child twin cousin friend roommate flatmate housemate boss "
    "manager supervisor coworker colleague cofounder mentor therapist neighbor teammate"
)
_PET_RELATIONS: Final = frozenset({"dog", "cat", "pet"})
_RELATION_NOUNS: Final = _FEMALE_RELATIONS | _MALE_RELATIONS | _NEUTRAL_RELATIONS | _PET_RELATIONS
# Words that qualify a relation noun without being one: "ex wife", "sister in law".
_RELATION_GLUE: Final = frozenset({"ex", "late", "step", "in", "law", "best", "god"})


class RefKind(StrEnum):
    SELF = "self"
    PRONOUN = "pronoun"
    RELATION = "relation"
    VAGUE = "vague"
    NAME = "name"


class _Gender(StrEnum):
    SHE = "she"
    HE = "he"


@dataclass(frozen=True)
class Relation:
    """A possessive reference: "my older sister" -> words "sister", alias "my sister"."""

    words: str
    kind: EntityKind
    gender: _Gender | None

    @property
    def alias(self) -> str:
        return f"my {self.words}"

    @property
    def placeholder(self) -> str:
        """The canonical name of a relative nobody has named yet."""
        return f"the user's {self.words}"


@dataclass(frozen=True)
class Ref:
    kind: RefKind
    surface: str
    relation: Relation | None = None


@lru_cache(maxsize=_PARSE_CACHE_SIZE)
def parse_relation(noun: str) -> Relation:
    """The canonical relation of a noun phrase: synonyms mapped, identity-neutral modifiers
    dropped, hyphens and underscores as spaces ("my older sister-in-law" -> "sister in law").
    Its kind is a person or a pet only when every word is relation vocabulary, so "my dog" is
    a pet and "my dog park" is not."""
    noun = normalise_name(noun)
    noun = RELATION_SYNONYMS.get(noun, noun)
    words = [RELATION_SYNONYMS.get(w, w) for w in re.split(r"[\s_]+|(?<=\w)-(?=\w)", noun)]
    kept = [w for w in words if w not in _DROPPED_MODIFIERS] or words
    parts = set(kept)
    if parts & _FEMALE_RELATIONS and not parts & _MALE_RELATIONS:
        gender: _Gender | None = _Gender.SHE
    elif parts & _MALE_RELATIONS and not parts & _FEMALE_RELATIONS:
        gender = _Gender.HE
    else:
        gender = None
    nouns = parts & _RELATION_NOUNS
    if not nouns or not parts <= _RELATION_NOUNS | _RELATION_GLUE:
        kind = EntityKind.OTHER
    elif nouns <= _PET_RELATIONS:
        kind = EntityKind.PET
    else:
        kind = EntityKind.PERSON
    return Relation(" ".join(kept), kind, gender)


def is_relation_word(noun: str) -> bool:
    return parse_relation(noun).kind is not EntityKind.OTHER


def classify(surface: str) -> Ref:
    norm = normalise_name(surface)
    if norm in _SELF_WORDS:
        return Ref(RefKind.SELF, surface)
    if norm in _SHE | _HE | _THEY | _IT:
        return Ref(RefKind.PRONOUN, surface)
    possessive = _POSSESSIVE_RE.match(norm)
    if possessive:
        return Ref(RefKind.RELATION, surface, parse_relation(possessive.group("noun")))
    if is_relation_word(norm):
        return Ref(RefKind.RELATION, surface, parse_relation(norm))  # "Mom", "sister"
    if norm in _VAGUE_WORDS or not name_key(surface):
        return Ref(RefKind.VAGUE, surface)
    if _DETERMINERS_RE.match(surface):
        return Ref(RefKind.VAGUE, surface)  # "the project"; "The Beatles" is a name
    return Ref(RefKind.NAME, surface)


@lru_cache(maxsize=_PARSE_CACHE_SIZE)
def name_key(name: str) -> str:
    """What fuzzy matching compares: lowercase alphanumerics, without titles ("Mr. Patel" ->
    "patel"), since a title is how a name is used, not part of it."""
    tokens = utils.default_process(name).split()
    kept = [t for t in tokens if t not in _HONORIFICS]
    return " ".join(kept or tokens)


@lru_cache(maxsize=_PARSE_CACHE_SIZE)
def is_relation_alias(alias: str) -> bool:
    return bool(_POSSESSIVE_RE.match(normalise_name(alias)))


def _gender_of(entity: Entity) -> _Gender | None:
    """The gender its relation aliases agree on ("my sister" -> she); None if unknown."""
    genders = {parse_relation(alias).gender for alias in entity.aliases if is_relation_alias(alias)}
    genders.discard(None)
    return genders.pop() if len(genders) == 1 else None


def pronoun_fits(pronoun: str, entity: Entity) -> bool:
    """Whether a pronoun can mean the entity; unknown gender fits he, she and they."""
    if entity.is_user:
        return False
    if pronoun in _THEY:
        return True
    if pronoun in _IT:
        return entity.kind is not EntityKind.PERSON
    if entity.kind not in (EntityKind.PERSON, EntityKind.PET, EntityKind.OTHER):
        return False
    gender = _gender_of(entity)
    wanted = _Gender.SHE if pronoun in _SHE else _Gender.HE
    return gender is None or gender is wanted
