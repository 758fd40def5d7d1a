"""Behaviour oracle for the pre-filter: every decision on a large corpus, to diff across a change.

`python -m tests.benchmarks.prefilter_oracle OUT.jsonl` screens every LoCoMo-dev turn, every
CRI persona message, every string literal of the pre-filter, firewall and segment unit tests,
each sentence of those on its own, and case, spacing and punctuation variants of all of them,
under several configurations, and writes one JSON line per observation: the screening (reason,
text, context, redactions, dropped rules), the full decision, the masked text, the question a
short answer would be kept with, each sentence's rule, and the CLI's output lines. Run it before
and after an optimisation; the two files must be identical.
"""

from __future__ import annotations

import ast
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memwrite.config.settings import FirewallAction, PreFilterConfig
from memwrite.config.tenant_overrides import UserSkipPattern
from memwrite.models import Role
from memwrite.pre_filter.checks import (
    mask_secrets,
    may_be_short_answer,
    pre_filter_turn,
    question_of,
    screen,
)
from memwrite.pre_filter.firewall import normalise, scan
from memwrite.pre_filter.rate_gate import RateGate
from memwrite.pre_filter.skip_rules import is_answer_word, match_skip_rule
from memwrite.reasons import SecretKind
from memwrite.segment import split_segments
from memwrite_local.cli.prefilter import run_prefilter
from tests.datasets import load_cri_messages, load_locomo

ROOT = Path(__file__).resolve().parents[2]
TEST_FILES = ("test_prefilter.py", "test_firewall.py", "test_segment.py")

CONFIGS: dict[str, PreFilterConfig] = {
    "default": PreFilterConfig(),
    "min1": PreFilterConfig(min_words=1, short_meta_request_max_chars=40),
    "strict": PreFilterConfig(
        min_words=0,
        user_skip_patterns=(
            UserSkipPattern(name="weather", pattern=r"(?:the )?weather.*"),
            UserSkipPattern(name="any_question", pattern=r"[^?]*\?"),
        ),
        firewall_actions=dict.fromkeys(SecretKind, FirewallAction.BLOCK),
        allowed_pii=frozenset({SecretKind.EMAIL, SecretKind.PHONE}),
    ),
}


def _literals() -> list[str]:
    found: list[str] = []
    for name in TEST_FILES:
        tree = ast.parse((ROOT / "tests" / "unit" / name).read_text(encoding="utf-8"))
        found += [
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value
        ]
    return found


def _variants(text: str) -> Iterator[str]:
    yield text
    yield text.lower()
    yield text.upper()
    yield text.title()
    yield text.rstrip(".!?… ")
    yield text + "!"
    yield text + "?"
    yield text.replace(" ", "  ")
    yield text.replace(". ", ".\n").replace("! ", "!\n")
    yield text.replace(",", "")
    yield text.replace("'", "’")
    yield text.replace("'", "")
    yield "Hey Mel! " + text
    yield text + " Thanks!"
    yield "  " + text + " \n"


def corpus() -> tuple[list[str], list[list[tuple[str, str]]]]:
    """Texts to screen alone, and conversations (role, content) to screen in order."""
    locomo = load_locomo()
    cri = load_cri_messages()
    base = [t.text for t in locomo] + [str(m["content"]) for m in cri] + _literals()
    sentences = [s.text for text in base for s in split_segments(normalise(text))]
    texts: list[str] = []
    seen: set[str] = set()
    for text in base + sentences:
        for variant in _variants(text):
            if variant not in seen:
                seen.add(variant)
                texts.append(variant)
    conversations: list[list[tuple[str, str]]] = []
    current: list[tuple[str, str]] = []
    last_conversation = None
    for turn in locomo:
        if turn.conversation != last_conversation and current:
            conversations.append(current)
            current = []
        last_conversation = turn.conversation
        current.append(("user", turn.text))
    conversations.append(current)
    conversations.append([(str(m["role"]), str(m["content"])) for m in cri])
    return texts, conversations


def _screening(text: str, config: PreFilterConfig, previous: str | None) -> dict[str, Any]:
    result = screen(text, config, previous)
    return {
        "reason": result.reason.model_dump(mode="json") if result.reason else None,
        "text": result.text,
        "redacted": [k.value for k in result.redacted],
        "context": result.context,
        "sentences": result.sentences,
        "dropped_by": list(result.dropped_by),
    }


def _decision(
    text: str,
    config: PreFilterConfig,
    gate: RateGate,
    n: int,
    previous: str | None,
    *,
    role: Role = Role.USER,
) -> dict[str, Any]:
    decision = pre_filter_turn(
        content=text,
        role=role,
        config=config,
        rate_gate=gate,
        rate_scope="oracle",
        claimant=str(n),
        now=float(n),
        previous=previous,
    )
    return decision.model_dump(mode="json")


def observations() -> Iterator[dict[str, Any]]:
    texts, conversations = corpus()
    for name, config in CONFIGS.items():
        gate = RateGate(config.rate_map_max_entries)
        previous: str | None = None
        # The other configurations on a sample, to keep a run within a few minutes.
        for n, text in enumerate(texts if name == "default" else texts[::5]):
            normalised = normalise(text)
            yield {
                "config": name,
                "text": text,
                "alone": _screening(text, config, None),
                "after": _screening(text, config, previous),
                "decision": _decision(text, config, gate, n, None),
                "masked": mask_secrets(text),
                "scan": [(f.kind.value, f.start, f.end) for f in scan(normalised)],
                "question": question_of(text, config),
                "short": may_be_short_answer(text),
                "answer_word": is_answer_word(text),
                "segments": [
                    (
                        s.text,
                        s.start,
                        s.end,
                        s.kind.value,
                        repr(
                            match_skip_rule(
                                s, short_meta_max_chars=config.short_meta_request_max_chars
                            )
                        ),
                    )
                    for s in split_segments(normalised)
                ],
            }
            # Every text after a question, so short answers and their contexts are exercised.
            previous = text if text.rstrip().endswith("?") else previous
        for index, conversation in enumerate(conversations):
            gate = RateGate(config.rate_map_max_entries)
            before: str | None = None
            for n, (role, content) in enumerate(conversation):
                yield {
                    "config": name,
                    "conversation": index,
                    "n": n,
                    "decision": _decision(content, config, gate, n, before, role=Role(role)),
                }
                before = content
    yield from _cli_outputs(texts, conversations)


def _cli_outputs(
    texts: list[str], conversations: list[list[tuple[str, str]]]
) -> Iterator[dict[str, Any]]:
    lines = [json.dumps({"role": "user", "content": text}) for text in texts]
    for index, conversation in enumerate(conversations):
        lines += [
            json.dumps(
                {"role": role, "content": content, "session_id": f"s{index}", "timestamp": n}
            )
            for n, (role, content) in enumerate(conversation)
        ]
    lines += ["", "not json", '{"role": "user"}', '{"role": "robot", "content": "hi"}']
    out, err = io.StringIO(), io.StringIO()
    status = run_prefilter(io.StringIO("\n".join(lines) + "\n"), out, err)
    yield {"cli_status": status, "cli_stderr": err.getvalue()}
    for line in out.getvalue().splitlines():
        yield {"cli": line}


def main() -> None:
    count = 0
    with open(sys.argv[1], "w", encoding="utf-8") as handle:
        for observation in observations():
            handle.write(json.dumps(observation, ensure_ascii=False) + "\n")
            count += 1
    print(f"{count} observations written to {sys.argv[1]}")


if __name__ == "__main__":
    main()
