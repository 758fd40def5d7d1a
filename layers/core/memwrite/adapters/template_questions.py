"""HyPE questions offline: a deterministic generator from a memory's type and triple.

HyPE indexes, beside a memory's own text, the questions a user would ask to find it, so that
"Where is Dana based?" finds "The user lives in Lisbon." although they share no word. With a
model (`memwrite.adapters.anthropic.questions`) the questions are written per memory; offline
(no API key, and in tests) they come from templates keyed by the predicate, then by the type.
Same memory, same questions: a retried HyPE job writes the same vectors.
"""

from __future__ import annotations

from memwrite.claims.candidate import MemoryType
from memwrite.model_ports import GeneratedQuestions
from memwrite.records.memory import MemoryUnit

__all__ = ["TemplateQuestions"]

# Questions per predicate, about "{who}" (the user or a named entity). Phrasings a user asks,
# with the value left out: the value is what the question is looking for.
_BY_PREDICATE: dict[str, tuple[str, ...]] = {
    "lives_in": (
        "Where does {who} live?",
        "Which city is {who} based in?",
        "Where is {who}'s home?",
    ),
    "works_at": (
        "Where does {who} work?",
        "Which company is {who}'s employer?",
        "Who does {who} work for?",
    ),
    "name": ("What is {who}'s name?", "What is {who} called?", "How should I address {who}?"),
    "allergic_to": (
        "What is {who} allergic to?",
        "Does {who} have any food allergies?",
        "Which foods must {who} avoid?",
    ),
    "likes": ("What does {who} like?", "What does {who} enjoy?", "What are {who}'s favourites?"),
    "dislikes": (
        "What does {who} dislike?",
        "What does {who} not enjoy?",
        "What should I avoid suggesting to {who}?",
    ),
    "partner": (
        "Who is {who}'s partner?",
        "Is {who} in a relationship?",
        "Who is {who} with?",
    ),
    "sister": ("Who is {who}'s sister?", "Does {who} have siblings?", "Who is in {who}'s family?"),
    "brother": (
        "Who is {who}'s brother?",
        "Does {who} have siblings?",
        "Who is in {who}'s family?",
    ),
    "job_title": (
        "What does {who} do for a living?",
        "What is {who}'s job?",
        "What is {who}'s role at work?",
    ),
}

_BY_TYPE: dict[MemoryType, tuple[str, ...]] = {
    MemoryType.FACT: (
        "What is {who}'s {attribute}?",
        "What do I know about {who}'s {attribute}?",
        "Tell me about {who}'s {attribute}.",
    ),
    MemoryType.PREFERENCE: (
        "What does {who} prefer regarding {attribute}?",
        "What are {who}'s preferences?",
        "What does {who} like or dislike?",
    ),
    MemoryType.INSTRUCTION: (
        "How does {who} want me to respond?",
        "What instructions did {who} give?",
        "How should I format answers for {who}?",
    ),
    MemoryType.DECISION: (
        "What did {who} decide about {attribute}?",
        "Which decision was made on {attribute}?",
        "What is the plan for {attribute}?",
    ),
    MemoryType.EVENT: (
        "What happened to {who} recently?",
        "What did {who} do?",
        "When did {who} {attribute}?",
    ),
    MemoryType.TASK: (
        "What does {who} need to do?",
        "What is on {who}'s to-do list?",
        "What tasks are pending for {who}?",
    ),
}


class TemplateQuestions:
    """`QuestionGenerator` without a model: templates by predicate, else by memory type."""

    def questions_for(self, memory: MemoryUnit, count: int) -> GeneratedQuestions:
        who = "the user" if memory.entity.casefold() in {"user", "the user"} else memory.entity
        attribute = memory.attribute.removeprefix("favorite_").replace("_", " ")
        templates = _BY_PREDICATE.get(memory.attribute) or _BY_TYPE[memory.type]
        if memory.attribute.startswith("favorite_"):
            templates = (
                f"What is {{who}}'s favourite {attribute}?",
                f"Which {attribute} does {{who}} like best?",
                "What does {who} like?",
            )
        questions = [t.format(who=who, attribute=attribute) for t in templates]
        return GeneratedQuestions([q[0].upper() + q[1:] for q in questions][:count])
