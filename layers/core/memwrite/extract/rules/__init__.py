"""Deterministic rule fast-path: the common simple first-person claims, without an LLM.

The turn is cut into sentences and clauses. Each clause is either a recognised claim (name,
age, job, employer, home, likes, dislikes, preferences, tools, allergies, diet, named
relations, standing instructions), a question, small talk, a guarded statement
(hypothetical, role-play, sarcasm), or something the rules do not understand. A clause or a
conjunct is small talk only when every word of it is (`content_free`), whatever its length; any
word of knowledge the rules did not read leaves the turn not *fully covered*, and the caller
hands it to the LLM (or keeps it whole as an episode when offline). Precision beats recall
here: a clause the rules half-understand is left to the LLM rather than guessed.

The regexes work on the original text (rewrites only delete words), so every value is a
verbatim slice of what the user wrote.

Layout: `extractor` (this entry point and the candidates) reads a turn through `clauses`
(splitting, guards, negation, continuation), which asks `table` for the first rule that
matches a clause body. Each topic module (`identity`, `family`, `food_and_health`,
`preferences`, `places`, `work`, `instructions`) holds its rules' patterns, specs and
builders side by side; `engine` holds what a rule is and the shared claim helpers,
`vocabulary` the shared word lists and regex fragments, `corrections` which claims the user
states as explicit corrections ("Correction: ...", "I misspoke", "X, not Y"), the candidates
that replace even a pinned memory, `times` the time phrase that ends a claim of change ("I
moved to Berlin last week") and the date it names.
"""

from memwrite.extract.rules.extractor import RuleExtraction, extract_with_rules

__all__ = ["RuleExtraction", "extract_with_rules"]
