"""Search index cost at 1k, 10k and 100k memories of one user: kNN, BM25 and hybrid.

The memories are synthetic but shaped like real ones (docs/design.md §9): typed, third-person
sentences about places, work, people, preferences, events, decisions, instructions and tasks,
each with three HyPE questions (tasks have none: BM25 only), generated deterministically from
a seeded RNG and embedded with `HashingEmbedder`. Texts are distinct (dedupe merges repeats);
questions are often shared ("Where does the user live?"), as HyPE questions are. One user
holds all of them, so the numbers show how a query scales with that user's partition.

Build time is split into embedding, upserts (SQLite + FTS5) and the lazy vector-graph build
that the first kNN query triggers. Query time is the median over a fixed set of realistic
queries, each run several times after a warm-up. `python -m tests.benchmarks.index_bench`
prints the results as JSON.
"""

from __future__ import annotations

import json
import random
import resource
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from memwrite.adapters.sqlite.embedded_index import EmbeddedIndex
from memwrite.claims.candidate import MemoryType, Tier
from memwrite.embedder import HashingEmbedder
from memwrite.index import IndexFilter, MemoryDoc

SIZES = (1_000, 10_000, 100_000)
SEED = 7
EMBED_BATCH = 4_096
REPEATS = 5
K = 10
TENANT, USER = "bench", "user-1"

_CITIES = (
    *("Berlin", "Lisbon", "Madrid", "Paris", "Rome", "Vienna", "Prague", "Warsaw", "Dublin"),
    *("Oslo", "Stockholm", "Helsinki", "Copenhagen", "Amsterdam", "Brussels", "Zurich", "Geneva"),
    *("Munich", "Hamburg", "Cologne", "Milan", "Naples", "Porto", "Seville", "Valencia"),
    *("Barcelona", "Lyon", "Marseille", "Toronto", "Montreal", "Vancouver", "Boston", "Chicago"),
    *("Denver", "Austin", "Seattle", "Portland", "Atlanta", "Tokyo", "Osaka", "Seoul"),
    *("Singapore", "Sydney", "Melbourne", "Auckland", "Nairobi", "Lagos", "Cairo", "Istanbul"),
    *("Athens", "Budapest", "Krakow", "Riga", "Tallinn", "Edinburgh", "Manchester"),
)
_NAMES = (
    *("Priya", "Anna", "Tom", "Maria", "Lukas", "Sofia", "Ahmed", "Chen", "Yuki", "Olga"),
    *("Diego", "Fatima", "Noah", "Emma", "Liam", "Mia", "Lena", "Jonas", "Sara", "Omar", "Ines"),
    *("Pedro", "Hana", "Ivan", "Nora", "Felix", "Clara", "Mateo", "Aisha", "Ben", "Elena"),
    *("Marco", "Julia", "Ravi", "Zoe", "Hugo", "Alice", "Leo", "Nina", "Oscar"),
)
_SURNAMES = (
    *("Smith", "Garcia", "Muller", "Rossi", "Silva", "Kowalski", "Tanaka", "Kim", "Novak"),
    *("Berg", "Costa", "Dubois", "Jensen", "Ivanova", "Patel", "Okafor", "Haddad", "Larsen"),
    *("Moreau", "Weber"),
)
_COMPANIES = (
    *("Google", "Amazon", "Spotify", "Zalando", "SAP", "Siemens", "Stripe", "Shopify"),
    *("Atlassian", "Canva", "Figma", "Notion", "Datadog", "Cloudflare", "GitLab", "Mozilla"),
    *("Adobe", "Netflix", "Airbnb", "Bosch", "Philips", "Nokia", "Klarna", "Revolut"),
)
_ROLES = (
    *("software engineer", "product manager", "data scientist", "designer", "nurse", "teacher"),
    *("lawyer", "accountant", "architect", "researcher", "consultant", "photographer", "chef"),
    *("pharmacist",),
)
_RELATIONS = (
    *("sister", "brother", "mother", "father", "partner", "wife", "husband", "daughter", "son"),
    *("cousin", "manager", "colleague", "friend", "neighbour", "mentor"),
)
_DRINKS = (
    *("oat milk lattes", "black coffee", "green tea", "sparkling water", "espresso", "chai"),
    *("hot chocolate", "matcha", "herbal tea", "orange juice"),
)
_HOBBIES = (
    *("bouldering", "running", "chess", "gardening", "painting", "cycling", "yoga", "swimming"),
    *("baking", "photography", "hiking", "piano", "tennis", "reading science fiction"),
    *("woodworking",),
)
_FOODS = (
    *("cilantro", "mushrooms", "olives", "spicy food", "seafood", "blue cheese", "raw onions"),
    *("eggplant", "licorice", "pineapple on pizza"),
)
_PROJECTS = (
    *("Inbox3", "Atlas", "Orion", "Falcon", "Nimbus", "Phoenix", "Aurora", "Zephyr", "Helix"),
    *("Quartz", "Beacon"),
)
_TOOLS = (
    *("Jira", "Linear", "Asana", "Trello", "Notion", "Slack", "Teams", "GitHub", "GitLab"),
    *("Confluence", "Figma", "Miro"),
)
_DAYS = (*("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),)
_MONTHS = (
    *("January", "February", "March", "April", "May", "June", "July", "August", "September"),
    *("October", "November", "December"),
)
_LANGUAGES = (
    *("German", "Portuguese", "Spanish", "French", "Italian", "Japanese", "English", "Dutch"),
    *("Polish",),
)
_CHORES = (
    *("renew the passport", "call the dentist", "pay the electricity bill", "book flights"),
    *("water the plants", "send the invoice", "buy a birthday gift", "submit the expense report"),
    *("back up the laptop",),
)
_PARTS_OF_DAY = ("morning", "afternoon", "evening")
# Details that real memories carry (when, who said it); with them every text can be unique.
_TAILS = (
    "",
    " since {year}",
    " for about {years} years",
    ", {other} mentioned",
    ", at least on weekdays",
    " (said in {other_month} {year})",
    " (noted on {other_month} {other_date}, {year})",
)

# (type, topic, text, three HyPE questions); a task gets no questions (it is never embedded).
_TEMPLATES: tuple[tuple[MemoryType, str, str, tuple[str, ...]], ...] = (
    (
        MemoryType.FACT,
        "location",
        "The user lives in {city}.",
        ("Where does the user live?", "Is the user based in {city}?", "Who lives in {city}?"),
    ),
    (
        MemoryType.FACT,
        "work",
        "The user works at {company} as a {role}.",
        ("Where does the user work?", "Is the user a {role}?", "Does the user work at {company}?"),
    ),
    (
        MemoryType.FACT,
        "family",
        "The user's {relation} {name} lives in {city}.",
        ("Where does {name} live?", "Who is {name}?", "Does the user have family in {city}?"),
    ),
    (
        MemoryType.FACT,
        "people",
        "{name} {surname} is the user's {relation} at {company}.",
        ("Who is {name} {surname}?", "Who is the user's {relation}?", "Who is at {company}?"),
    ),
    (
        MemoryType.PREFERENCE,
        "food",
        "The user prefers {drink} in the {part_of_day}.",
        (
            "What does the user drink in the {part_of_day}?",
            "Does the user like {drink}?",
            "How does the user take their coffee?",
        ),
    ),
    (
        MemoryType.PREFERENCE,
        "hobby",
        "The user enjoys {hobby} on {day}s with {name}.",
        (
            "What does the user do on {day}s?",
            "Who does the user go {hobby} with?",
            "What are the user's hobbies?",
        ),
    ),
    (
        MemoryType.PREFERENCE,
        "food",
        "The user dislikes {food} and avoids it when eating out.",
        ("Does the user eat {food}?", "What food does the user dislike?", "Any {food} allergy?"),
    ),
    (
        MemoryType.EVENT,
        "meeting",
        "On {month} {date} the user met {name} in {city} to discuss the {project} launch.",
        (
            "When did the user meet {name}?",
            "What happened with the {project} launch?",
            "Who did the user meet in {city}?",
        ),
    ),
    (
        MemoryType.EVENT,
        "travel",
        "The user flew to {city} in {month} for a {company} conference.",
        (
            "When was the user in {city}?",
            "Did the user attend a {company} conference?",
            "Where did the user travel in {month}?",
        ),
    ),
    (
        MemoryType.DECISION,
        "tools",
        "The team decided to move {project} from {tool} to {other_tool} by {month}.",
        (
            "Which tool does the {project} team use?",
            "Is the team leaving {tool}?",
            "When does {project} move to {other_tool}?",
        ),
    ),
    (
        MemoryType.INSTRUCTION,
        "style",
        "Always answer the user in {language} and keep replies under {words} words.",
        (
            "Which language should replies use?",
            "Should answers be in {language}?",
            "How long should replies be?",
        ),
    ),
    (MemoryType.TASK, "todo", "Remind the user to {chore} before {day}.", ()),
)

QUERIES = (
    "Where does the user live?",
    "Who is Priya?",
    "What did the team decide about Jira?",
    "coffee in the morning",
    "When did the user meet Tom in Lisbon?",
    "What does the user do on Saturdays?",
    "Does the user work at Spotify?",
    "the user's sister",
    "Which language should replies use?",
    "renew the passport",
    "bouldering with Anna",
    "Inbox3 launch",
)
# The filter a search applies by default: visible tiers and a confidence floor (docs/design.md §12).
DEFAULT_SEARCH_FILTER = IndexFilter(
    tiers=frozenset({Tier.CANDIDATE, Tier.WORKING, Tier.FACT}), min_confidence=0.4
)


@dataclass(frozen=True)
class SyntheticMemory:
    memory_id: str
    type: MemoryType
    topic: str
    tier: Tier
    confidence: float
    text: str
    questions: tuple[str, ...]


def synthetic_memories(n: int, seed: int = SEED) -> list[SyntheticMemory]:
    """`n` memories with distinct texts (dedupe has merged any repeats), the same on every run."""
    rng = random.Random(seed)
    memories: list[SyntheticMemory] = []
    texts: set[str] = set()
    while len(memories) < n:
        memory_type, topic, template, questions = rng.choice(_TEMPLATES)
        tool, other_tool = rng.sample(_TOOLS, 2)
        slots = {
            "city": rng.choice(_CITIES),
            "company": rng.choice(_COMPANIES),
            "role": rng.choice(_ROLES),
            "relation": rng.choice(_RELATIONS),
            "name": rng.choice(_NAMES),
            "surname": rng.choice(_SURNAMES),
            "drink": rng.choice(_DRINKS),
            "part_of_day": rng.choice(_PARTS_OF_DAY),
            "hobby": rng.choice(_HOBBIES),
            "day": rng.choice(_DAYS),
            "food": rng.choice(_FOODS),
            "month": rng.choice(_MONTHS),
            "date": rng.randint(1, 28),
            "project": rng.choice(_PROJECTS),
            "tool": tool,
            "other_tool": other_tool,
            "language": rng.choice(_LANGUAGES),
            "words": rng.choice((50, 100, 150, 200)),
            "chore": rng.choice(_CHORES),
        }
        tail = rng.choice(_TAILS).format(
            year=rng.randint(1995, 2026),
            years=rng.randint(2, 20),
            other=rng.choice(_NAMES),
            other_month=rng.choice(_MONTHS),
            other_date=rng.randint(1, 28),
        )
        text = template.format(**slots)[:-1] + tail + "."
        if text in texts:
            continue
        texts.add(text)
        confidence = round(rng.uniform(0.2, 1.0), 2)
        memories.append(
            SyntheticMemory(
                memory_id=f"m{len(memories):06d}",
                type=memory_type,
                topic=topic,
                tier=_tier(confidence),
                confidence=confidence,
                text=text,
                questions=tuple(question.format(**slots) for question in questions),
            )
        )
    return memories


def _tier(confidence: float) -> Tier:
    if confidence < 0.3:
        return Tier.QUARANTINE
    if confidence < 0.5:
        return Tier.CANDIDATE
    return Tier.WORKING if confidence < 0.9 else Tier.FACT


def _docs(memories: list[SyntheticMemory], embedder: HashingEmbedder) -> Iterator[MemoryDoc]:
    """Embed in batches (as the HyPE stage does per outbox batch) and yield index documents."""
    for start in range(0, len(memories), EMBED_BATCH):
        batch = memories[start : start + EMBED_BATCH]
        embedded = [m for m in batch if m.type is not MemoryType.TASK]
        content = embedder.embed([m.text for m in embedded])
        questions = embedder.embed([q for m in embedded for q in m.questions])
        vectors = {}
        offset = 0
        for row, memory in enumerate(embedded):
            count = len(memory.questions)
            vectors[memory.memory_id] = (
                content[row],
                tuple(questions[offset : offset + count]),
            )
            offset += count
        for memory in batch:
            vector, question_vectors = vectors.get(memory.memory_id, (None, ()))
            yield MemoryDoc(
                memory_id=memory.memory_id,
                tenant=TENANT,
                user_id=USER,
                text=memory.text,
                type=memory.type,
                topic=memory.topic,
                tier=memory.tier,
                confidence=memory.confidence,
                vector=vector,
                question_vectors=question_vectors,
            )


def _samples_ms(query: Callable[[str], object], queries: tuple[str, ...]) -> list[float]:
    for text in queries:
        query(text)  # warm-up: statement cache, lazy graph build
    samples = []
    for _ in range(REPEATS):
        for text in queries:
            started = time.perf_counter()
            query(text)
            samples.append((time.perf_counter() - started) * 1000)
    return samples


def _median_ms(query: Callable[[str], object], queries: tuple[str, ...]) -> float:
    return round(statistics.median(_samples_ms(query, queries)), 3)


def _p95_ms(query: Callable[[str], object], queries: tuple[str, ...]) -> float:
    return round(statistics.quantiles(_samples_ms(query, queries), n=20)[-1], 3)


def measure(n: int) -> dict[str, Any]:
    embedder = HashingEmbedder()
    memories = synthetic_memories(n)
    index = EmbeddedIndex(dimension=embedder.dimension)
    embed_s = upsert_s = 0.0
    docs = _docs(memories, embedder)
    while True:
        started = time.perf_counter()
        doc = next(docs, None)
        embed_s += time.perf_counter() - started
        if doc is None:
            break
        started = time.perf_counter()
        index.upsert(doc)
        upsert_s += time.perf_counter() - started
    query_vectors = dict(zip(QUERIES, embedder.embed(QUERIES), strict=True))
    started = time.perf_counter()
    index.knn(TENANT, USER, query_vectors[QUERIES[0]], K)  # the first kNN builds the graph
    graph_s = time.perf_counter() - started

    def knn(text: str) -> object:
        return index.knn(TENANT, USER, query_vectors[text], K)

    def knn_filtered(text: str) -> object:
        return index.knn(TENANT, USER, query_vectors[text], K, filter=DEFAULT_SEARCH_FILTER)

    def bm25(text: str) -> object:
        return index.bm25(TENANT, USER, text, K)

    def hybrid(text: str) -> object:
        return index.hybrid(
            TENANT, USER, text, query_vectors[text], K, filter=DEFAULT_SEARCH_FILTER
        )

    return {
        "memories": n,
        "vectors": sum(1 + len(m.questions) for m in memories if m.type is not MemoryType.TASK),
        "build_s": {
            "embed": round(embed_s, 2),
            "upsert": round(upsert_s, 2),
            "vector_graph": round(graph_s, 2),
            "total": round(embed_s + upsert_s + graph_s, 2),
        },
        "median_query_ms": {
            "knn": _median_ms(knn, QUERIES),
            "knn_filtered": _median_ms(knn_filtered, QUERIES),
            "bm25": _median_ms(bm25, QUERIES),
            "hybrid_filtered": _median_ms(hybrid, QUERIES),
        },
        # The search API's query (hybrid, default filter): its tail too.
        "p95_query_ms": {"hybrid_filtered": _p95_ms(hybrid, QUERIES)},
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }


def run(sizes: tuple[int, ...] = SIZES) -> dict[str, Any]:
    results = [measure(n) for n in sizes]
    smallest, largest = results[0]["median_query_ms"], results[-1]["median_query_ms"]
    return {
        "k": K,
        "queries": len(QUERIES),
        "sizes": results,
        f"ratio_{sizes[-1]}_to_{sizes[0]}": {
            name: round(largest[name] / smallest[name], 2) for name in smallest
        },
        "goal_ratio": 1.5,
    }


if __name__ == "__main__":
    # `python -m tests.benchmarks.index_bench [1000,10000]`: some sizes only (100k takes minutes)
    chosen = tuple(int(n) for n in sys.argv[1].split(",")) if len(sys.argv) > 1 else SIZES
    print(json.dumps(run(chosen), indent=2))
