"""`HashingEmbedder`: deterministic across processes, unit rows, and similar enough for dedupe."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memwrite.embedder import HashingEmbedder
from memwrite.model_ports import Embedder

ROOT = Path(__file__).resolve().parents[2]
BERLIN = "The user lives in Berlin."


def cosine(embedder: Embedder, first: str, second: str) -> float:
    vectors = embedder.embed([first, second])
    return float(vectors[0] @ vectors[1])


def test_the_same_text_gets_the_same_vector_in_another_process() -> None:
    # Given a vector computed here
    text = "Priya said the Inbox3 deadline is Friday."
    here = HashingEmbedder().embed([text])[0]
    # When another interpreter, with its own hash seed, embeds the same text
    code = (
        "import sys; from memwrite.embedder import HashingEmbedder; "
        "sys.stdout.write(HashingEmbedder().embed([sys.argv[1]])[0].tobytes().hex())"
    )
    there = subprocess.run(
        [sys.executable, "-c", code, text],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    ).stdout
    # Then the vectors are identical, bit for bit
    assert np.array_equal(here, np.frombuffer(bytes.fromhex(there), dtype=np.float32))


def test_rows_are_unit_float32_vectors_of_the_dimension() -> None:
    # Given an embedder of a non-default dimension
    embedder = HashingEmbedder(dimension=64)
    # When it embeds texts of different lengths
    vectors = embedder.embed(["Hi", BERLIN, "word " * 200, "Ünïcödé café, naïve façade"])
    # Then each row is a float32 unit vector of that dimension
    assert vectors.shape == (4, 64)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)


def test_no_texts_and_no_words_give_empty_and_zero_rows() -> None:
    # Given an embedder
    embedder = HashingEmbedder()
    # When it embeds nothing, and texts without a single word
    # Then it returns shape (0, dim), and zero rows (no direction to normalise)
    assert embedder.embed([]).shape == (0, embedder.dimension)
    assert not embedder.embed(["", "?!"]).any()


def test_case_and_unicode_forms_do_not_change_the_vector() -> None:
    # Given one text in different cases and Unicode normal forms
    embedder = HashingEmbedder()
    composed, decomposed = "Café in Zürich", "Cafe\u0301 in Zu\u0308rich"
    # When both are embedded
    # Then the vectors are the same
    assert cosine(embedder, composed, decomposed.upper()) == pytest.approx(1.0)


def test_near_duplicates_are_close_and_different_facts_are_not() -> None:
    # Given a fact, a restatement with one more detail, the same predicate with another
    # value, and an unrelated fact
    embedder = HashingEmbedder()
    # When their similarities to the fact are measured
    restated = cosine(embedder, BERLIN, "The user lives in Berlin, Germany.")
    other_city = cosine(embedder, BERLIN, "The user lives in Lisbon.")
    unrelated = cosine(embedder, BERLIN, "Priya said the Inbox3 deadline is Friday.")
    # Then the restatement reaches the dedupe band (>= 0.80, DedupeConfig), the other value
    # stays well below it, and the unrelated fact is near zero
    assert restated >= 0.80
    assert other_city <= 0.60
    assert restated - other_city >= 0.25
    assert abs(unrelated) <= 0.10
