"""`WordLlamaEmbedder`: the embedded default, loaded from its wheel with the network cut off."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from memwrite.config.settings import SearchConfig
from memwrite.wiring.search import offline_embedder

ROOT = Path(__file__).resolve().parents[2]

# A fresh interpreter: every socket connection raises, then the default embedder is built as
# the wiring builds it, and it embeds.
_OFFLINE = """
import logging, socket, sys

def refuse(*args, **kwargs):
    raise OSError("network access attempted")

socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
handlers = list(logging.getLogger().handlers)

from memwrite.config.settings import SearchConfig
from memwrite.wiring.search import offline_embedder

search = SearchConfig()
embedder = offline_embedder(search.embedder, search.dimension)
vectors = embedder.embed(["The user lives in Lisbon.", "Which city is she based in?"])
assert logging.getLogger().handlers == handlers, "the root logger was changed"
print(search.embedder, vectors.shape[1], round(float(vectors[0] @ vectors[0]), 3))
"""


def test_the_default_embedder_loads_and_embeds_with_every_socket_refused() -> None:
    # Given a process where any attempt to reach the network raises
    # When it builds the embedded mode's default embedder and embeds two texts
    done = subprocess.run(
        [sys.executable, "-c", _OFFLINE], capture_output=True, text=True, cwd=ROOT, check=False
    )
    # Then it is WordLlama at 256 dimensions, and it worked without a connection
    assert done.returncode == 0, done.stderr
    name, dimension, norm = done.stdout.split()
    assert (name, dimension, norm) == ("wordllama", "256", "1.0")


@pytest.mark.parametrize("dimension", [64, 128, 256])
def test_rows_are_unit_vectors_of_the_configured_dimension(dimension: int) -> None:
    # Given WordLlama truncated to a configured dimension
    embedder = offline_embedder("wordllama", dimension)
    # When it embeds texts, an empty one among them, and nothing at all
    vectors = embedder.embed(["Hi", "The user lives in Berlin.", "", "word " * 300])
    # Then rows are float32 unit vectors of that dimension, zero for no tokens
    assert vectors.shape == (4, dimension) and vectors.dtype == np.float32
    norms = np.linalg.norm(vectors, axis=1)
    assert np.allclose(norms[[0, 1, 3]], 1.0, atol=1e-5) and norms[2] == 0.0
    assert embedder.embed([]).shape == (0, dimension)


def test_meaning_ranks_where_words_do_not_overlap() -> None:
    # Given memories and questions that share no content word with them
    embedder = offline_embedder("wordllama", None)
    memories = [
        "The user lives in Lisbon.",
        "The user is allergic to peanuts.",
        "The user loves jazz.",
    ]
    questions = [
        "Which city is she based in?",
        "Any food she must avoid?",
        "What music does she enjoy?",
    ]
    # When each question is compared with every memory
    similarity = embedder.embed(questions) @ embedder.embed(memories).T
    # Then each question is closest to its own memory
    assert list(np.argmax(similarity, axis=1)) == [0, 1, 2]


def test_a_dimension_the_embedder_cannot_give_is_refused() -> None:
    # Given dimensions that only Titan gives, and one WordLlama gives
    # Then the config refuses the first for WordLlama, and the embedder's own is the default
    with pytest.raises(ValidationError, match="does not fit embedder"):
        SearchConfig(embedder="wordllama", embedding_dimension=1024)
    with pytest.raises(ValidationError, match="does not fit embedder"):
        SearchConfig(embedder="bedrock", embedding_dimension=64)
    assert SearchConfig(embedding_dimension=128).dimension == 128
    assert SearchConfig(embedder="bedrock").dimension == 512
    assert SearchConfig(embedder="hashing").dimension == 384
