"""The extraction prompt: exact snapshots of both variants, turn refs, and the context limits."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from memwrite.claims.candidate import Candidate, MemoryType
from memwrite.config.settings import ExtractConfig
from memwrite.models import Role
from memwrite.prompts import RenderedPrompt
from memwrite.prompts.extract import (
    VERSION,
    ActiveEntity,
    BatchTurn,
    ExtractPromptInput,
    RecentMemory,
    SessionTurn,
    render,
    render_detail,
    turn_refs,
)

SNAPSHOTS = Path(__file__).parent / "snapshots"
START = datetime(2025, 3, 14, 9, 0, tzinfo=UTC)
SECTIONS = ("output_schema", "type_rules", "grounding_rules", "quality_rules", "examples")


def busy_input() -> ExtractPromptInput:
    """More context than the default limits allow, one source turn and one batch turn over
    2,000 chars, and a batch of three turns on different days (one timestamp naive)."""
    turns = [
        SessionTurn(
            role=Role.USER if i % 2 == 0 else Role.ASSISTANT,
            text=f"Session turn number {i} about the Inbox3 launch.",
            timestamp=START + timedelta(minutes=i),
        )
        for i in range(24)
    ]
    turns[-1] = SessionTurn(role=Role.ASSISTANT, text="Pricing table. " + "x" * 2_100)
    return ExtractPromptInput(
        turns=(
            BatchTurn(
                turn_id="turn-41",
                role=Role.USER,
                text="Let's take the Team plan. " + "y" * 2_100,
                timestamp=datetime(2025, 3, 12, 16, 30, tzinfo=UTC),
            ),
            BatchTurn(
                turn_id="turn-42",
                role=Role.USER,
                text="My manager moved our 1:1 to next Thursday, and I'm switching us to Linear.",
                timestamp=datetime(2025, 3, 14, 10, 0),  # naive: taken as UTC
            ),
            BatchTurn(
                turn_id="turn-43",
                role=Role.ASSISTANT,
                text="Noted: your 1:1 is now on 2025-03-20.",
                timestamp=datetime(2025, 3, 14, 10, 1, tzinfo=UTC),
            ),
        ),
        session_turns=tuple(turns),
        active_entities=tuple(
            ActiveEntity(name=f"Entity{i}", kind="person", aliases=(f"E{i}",)) for i in range(35)
        ),
        recent_memories=tuple(
            RecentMemory(text=f"The user mentioned memory number {i}.", type=MemoryType.FACT)
            for i in range(18)
        ),
    )


def as_text(prompt: RenderedPrompt) -> str:
    messages = "\n".join(f"=== {m['role']} ===\n{m['content']}" for m in prompt.messages)
    return f"VERSION {VERSION}\n=== system ===\n{prompt.system}\n{messages}\n"


def assert_snapshot(name: str, actual: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
    if not path.exists():
        pytest.fail(f"{path} is missing: run with UPDATE_SNAPSHOTS=1 to create it")
    expected = path.read_text(encoding="utf-8")
    if actual != expected:
        same_version = expected.partition("\n")[0] == f"VERSION {VERSION}"
        hint = "bump VERSION, then " if same_version else ""
        pytest.fail(f"{name} changed: {hint}review and rerun with UPDATE_SNAPSHOTS=1")


def section(text: str, tag: str) -> list[str]:
    body = text.split(f"<{tag}>\n", 1)[1].split(f"\n</{tag}>", 1)[0]
    return body.splitlines()


def test_full_prompt_matches_the_snapshot() -> None:
    # Given a batch with more context than the limits allow
    inp = busy_input()
    # When the full-pass prompt is rendered with the default config
    prompt = render(inp, ExtractConfig())
    # Then it is exactly the reviewed snapshot
    assert_snapshot("extract_prompt.txt", as_text(prompt))


def test_detail_prompt_matches_the_snapshot() -> None:
    # Given the same batch and a window of its conversation: context, then two batch turns
    inp = busy_input()
    # When the detail-pass prompt is rendered
    prompt = render_detail(inp, (*inp.session_turns[-2:], *inp.turns[1:]), ExtractConfig())
    # Then it is exactly the reviewed snapshot
    assert_snapshot("extract_detail_prompt.txt", as_text(prompt))


def test_system_prompts_carry_every_section() -> None:
    # Given both variants
    inp = busy_input()
    for prompt in (render(inp, ExtractConfig()), render_detail(inp, (), ExtractConfig())):
        # Then each rule section is present once and closed
        for tag in SECTIONS:
            assert prompt.system.count(f"<{tag}>") == 1
            assert prompt.system.count(f"</{tag}>") == 1
        assert '{"candidates": []}' in prompt.system  # [] is a normal answer
        assert "confidence <= 0.3" in prompt.system
    # And only the detail variant has the detail focus
    assert "<detail_focus>" in render_detail(inp, (), ExtractConfig()).system
    assert "<detail_focus>" not in render(inp, ExtractConfig()).system


def test_every_example_type_has_a_keep_and_a_discard_example() -> None:
    # When the full prompt is rendered
    system = render(busy_input(), ExtractConfig()).system
    # Then every memory type is illustrated both ways
    for memory_type in MemoryType:
        for verdict in ("keep", "discard"):
            assert f'<example type="{memory_type.value}" verdict="{verdict}">' in system


def test_output_schema_describes_every_candidate_field() -> None:
    # When the full prompt is rendered
    lines = section(render(busy_input(), ExtractConfig()).system, "output_schema")
    # Then each Candidate field has a non-empty instruction
    described = {line[2:].split(":", 1)[0]: line.split(":", 1)[1].strip() for line in lines[1:]}
    assert set(described) == set(Candidate.model_fields)
    assert all(described.values())
    # And source_turn_id asks for a turn ref
    assert described["source_turn_id"].startswith('Required: the ref ("T1", "T2", ...)')


def test_context_is_cut_to_the_config_limits() -> None:
    # Given more entities, memories and turns than the defaults allow
    inp = busy_input()
    config = ExtractConfig()
    # When the prompt is rendered
    user = render(inp, config).messages[0]["content"]
    # Then the first entities and memories and the latest turns are kept, up to the limits
    entities = section(user, "active_entities")
    assert len(entities) == config.max_entities
    assert '"Entity0"' in entities[0]
    assert "Entity30" not in user
    memories = section(user, "recent_memories")
    assert len(memories) == config.max_recent_memories
    assert "memory number 15" not in user
    turns = section(user, "session_turns")
    assert len(turns) == config.max_source_turns
    assert "number 3 about" not in user
    assert "number 4 about" in turns[0]
    # And long turns, earlier or new, are truncated at max_turn_chars, visibly
    assert "x" * 2_001 not in user
    assert turns[-1].endswith(' ... [truncated]"}')
    new_turns = section(user, "new_turns")
    assert "y" * 2_001 not in user
    assert new_turns[0].endswith(' ... [truncated]"}')


def test_smaller_limits_from_config_are_honoured() -> None:
    # Given a config with tighter limits
    config = ExtractConfig(max_entities=2, max_recent_memories=1, max_source_turns=0)
    # When the prompt is rendered
    user = render(busy_input(), config).messages[0]["content"]
    # Then the sections hold exactly that much, and every batch turn is still shown
    assert len(section(user, "active_entities")) == 2
    assert len(section(user, "recent_memories")) == 1
    assert section(user, "session_turns") == ["(none)"]
    assert len(section(user, "new_turns")) == 3


def test_batch_turns_are_shown_by_ref_with_their_own_timestamps() -> None:
    # Given a batch of three turns on different days, one timestamp naive
    inp = busy_input()
    # When the prompt is rendered
    user = render(inp, ExtractConfig()).messages[0]["content"]
    # Then the batch is the last section, in order, each turn with its ref, role, absolute UTC
    # timestamp and weekday
    assert user.rstrip().endswith("</new_turns>")
    new_turns = section(user, "new_turns")
    assert [line.split(', "text"', 1)[0] for line in new_turns] == [
        '{"ref": "T1", "role": "user", "timestamp": "2025-03-12T16:30:00Z", "weekday": "Wednesday"',
        '{"ref": "T2", "role": "user", "timestamp": "2025-03-14T10:00:00Z", "weekday": "Friday"',
        '{"ref": "T3", "role": "assistant", "timestamp": "2025-03-14T10:01:00Z", '
        '"weekday": "Friday"',
    ]
    assert "next Thursday" in new_turns[1]
    # And the model never sees turn ids, and earlier turns carry no ref
    assert "turn-4" not in user
    assert all('"ref"' not in line for line in section(user, "session_turns"))
    # And the refs map back to the turns
    assert {ref: turn.turn_id for ref, turn in turn_refs(inp).items()} == {
        "T1": "turn-41",
        "T2": "turn-42",
        "T3": "turn-43",
    }


def test_detail_window_keeps_the_full_pass_refs_and_marks_context() -> None:
    # Given a window with two context turns and the batch's last two turns
    inp = busy_input()
    window: tuple[SessionTurn | BatchTurn, ...] = (*inp.session_turns[-3:-1], *inp.turns[1:])
    # When the detail prompt is rendered
    user = render_detail(inp, window, ExtractConfig()).messages[0]["content"]
    # Then the window lists them in order: context without a ref, batch turns as T2 and T3
    lines = section(user, "window")
    assert [line.split(",", 1)[0] for line in lines] == [
        '{"role": "assistant"',
        '{"role": "user"',
        '{"ref": "T2"',
        '{"ref": "T3"',
    ]
    # And it shows no recent memories or other sections of the full pass
    assert "<recent_memories>" not in user
    assert "<new_turns>" not in user


def test_a_window_turn_outside_the_batch_is_refused() -> None:
    # Given a batch turn that is not part of the input's batch
    inp = busy_input()
    stranger = BatchTurn(turn_id="turn-99", role=Role.USER, text="Hi there.", timestamp=START)
    # When a detail prompt is rendered with it, then it is refused
    with pytest.raises(ValueError, match="'turn-99' is not a turn of the batch"):
        render_detail(inp, (stranger,), ExtractConfig())


def test_a_batch_needs_turns_with_unique_ids() -> None:
    # Given a turn
    one = BatchTurn(turn_id="turn-1", role=Role.USER, text="I live in Lisbon.", timestamp=START)
    # Then an empty batch, a repeated turn id and an empty text are refused
    with pytest.raises(ValidationError, match="at least 1 item"):
        ExtractPromptInput(turns=())
    with pytest.raises(ValidationError, match="turn ids must be unique"):
        ExtractPromptInput(turns=(one, one.model_copy(update={"text": "And Porto."})))
    with pytest.raises(ValidationError, match="at least 1 character"):
        BatchTurn(turn_id="turn-2", role=Role.USER, text="", timestamp=START)
