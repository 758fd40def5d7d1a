"""Relation words as users write them, mapped to one canonical wording.

Shared by the rule extractor (which turns the canonical word into a predicate: "best friend" ->
`best_friend`) and resolve refs (which uses it in aliases: "my best friend"), so both agree on
what "mom" or "bestie" means.
"""

from __future__ import annotations

from typing import Final

__all__ = ["RELATION_SYNONYMS"]

RELATION_SYNONYMS: Final[dict[str, str]] = {
    "mom": "mother",
    "mum": "mother",
    "mommy": "mother",
    "mama": "mother",
    "dad": "father",
    "daddy": "father",
    "papa": "father",
    "grandma": "grandmother",
    "granny": "grandmother",
    "nana": "grandmother",
    "grandpa": "grandfather",
    "hubby": "husband",
    "kid": "child",
    "co-worker": "coworker",
    "co-founder": "cofounder",
    "neighbour": "neighbor",
    "fiancé": "fiance",
    "fiancée": "fiance",
    "fiancee": "fiance",
    "bestie": "best friend",
    "buddy": "friend",
    "pal": "friend",
    "puppy": "dog",
    "kitten": "cat",
}
