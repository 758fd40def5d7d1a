"""A hand-made search set where the query never uses the memory's words: recall@k of hybrid
search with and without HyPE question vectors, by embedder and fusion (tests/unit/test_hype.py,
`make bench`).

One user's memories as (type, entity, attribute, value, text); each query names the memory it
should find. Written for this project.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from memwrite.adapters.sqlite.embedded_index import EmbeddedIndex
from memwrite.adapters.template_questions import TemplateQuestions
from memwrite.claims.candidate import MemoryType, Tier
from memwrite.hype.stage import document_of
from memwrite.ids import content_hash
from memwrite.index import DEFAULT_FUSION, Fusion, IndexFilter
from memwrite.model_ports import Embedder
from memwrite.records.memory import MemoryUnit
from memwrite.wiring.search import offline_embedder

F, P, INS = MemoryType.FACT, MemoryType.PREFERENCE, MemoryType.INSTRUCTION
MEMORIES: list[tuple[MemoryType, str, str, str, str]] = [
    (F, "user", "lives_in", "Lisbon", "The user lives in Lisbon."),
    (F, "user", "works_at", "Google", "The user works at Google."),
    (F, "user", "name", "Dana", "The user's name is Dana."),
    (F, "user", "allergic_to", "peanuts", "The user is allergic to peanuts."),
    (F, "user", "partner", "Alex", "The user's partner is named Alex."),
    (F, "user", "sister", "Ana", "The user's sister is named Ana."),
    (F, "Ana", "lives_in", "Porto", "Ana, the user's sister, lives in Porto."),
    (P, "user", "likes", "jazz", "The user loves jazz."),
    (P, "user", "dislikes", "cilantro", "The user hates cilantro."),
    (P, "user", "favorite_food", "ramen", "The user's favorite food is ramen."),
    (INS, "user", "instruction", "bullet points", "The user wants answers in short bullet points."),
    (F, "user", "job_title", "nurse", "The user is a nurse."),
    (F, "user", "owns", "a cat", "The user has a cat named Miso."),
    (F, "user", "speaks", "Portuguese", "The user speaks Portuguese fluently."),
    (F, "user", "studies", "law", "The user is studying law at night school."),
    (F, "user", "drives", "a Tesla", "The user drives a Tesla."),
]
QUERIES: list[tuple[str, str]] = [
    ("Which city is she based in?", "The user lives in Lisbon."),
    ("Who is her employer?", "The user works at Google."),
    ("How should I address her?", "The user's name is Dana."),
    ("Any food she must avoid?", "The user is allergic to peanuts."),
    ("Is she in a relationship?", "The user's partner is named Alex."),
    ("Does she have siblings?", "The user's sister is named Ana."),
    ("What music does she enjoy?", "The user loves jazz."),
    ("What should I avoid suggesting to her?", "The user hates cilantro."),
    ("Which dish does she like best?", "The user's favorite food is ramen."),
    ("How should I format answers for her?", "The user wants answers in short bullet points."),
    ("What does she do for a living?", "The user is a nurse."),
    ("Where is her home?", "The user lives in Lisbon."),
    ("Who does she work for?", "The user works at Google."),
    ("What are her favourites?", "The user loves jazz."),
]


def memory_unit(
    memory_type: MemoryType, entity: str, attribute: str, value: str, text: str
) -> MemoryUnit:
    at = datetime(2025, 1, 1, tzinfo=UTC)
    return MemoryUnit(
        memory_id=content_hash("paraphrase", attribute, value, text),
        tenant="t1",
        user_id="dana",
        text=text,
        type=memory_type,
        topic="general",
        importance=0.5,
        confidence=0.9,
        extractor_confidence=0.9,
        tier=Tier.FACT,
        source="user_explicit",
        source_session="s-1",
        trace_id="trace",
        turn_id="turn",
        created_at=at,
        observed_at=at,
        last_seen=at,
        entity=entity,
        entity_id=entity.casefold(),
        attribute=attribute,
        value=value,
        predicate_is_stateful=True,
    )


def recall_at(
    k: int,
    *,
    with_questions: bool,
    embedder: Embedder | None = None,
    fusion: Fusion = DEFAULT_FUSION,
) -> float:
    """Share of queries whose memory is in the top `k` of hybrid search (the query API's),
    with the embedded default's embedder unless another is given."""
    embedder = embedder or offline_embedder("wordllama", None)
    index = EmbeddedIndex(dimension=embedder.dimension)
    questions = TemplateQuestions()
    for entry in MEMORIES:
        memory = memory_unit(*entry)
        asked = questions.questions_for(memory, 3).questions if with_questions else []
        vectors = embedder.embed([memory.text, *asked])
        doc = document_of(memory)
        index.upsert(replace(doc, vector=vectors[0], question_vectors=tuple(vectors[1:])))
    by_text = {entry[4]: memory_unit(*entry).memory_id for entry in MEMORIES}
    found = 0
    for query, expected in QUERIES:
        hits = index.hybrid(
            "t1",
            "dana",
            query,
            embedder.embed([query])[0],
            k,
            filter=IndexFilter(min_confidence=0.4),
            fusion=fusion,
        )
        found += by_text[expected] in {hit.memory_id for hit in hits}
    return found / len(QUERIES)
