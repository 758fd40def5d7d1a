"""`Embedder` offline: WordLlama's static token embeddings (`search.embedder: wordllama`).

WordLlama (MIT) ships the `l2_supercat` model inside its wheel: one 256-dimensional vector per
token of the Llama 2 tokenizer (16 MB of weights, the tokenizer's JSON beside them). A text's
vector is the mean of its tokens' vectors, so a short text embeds in well under a millisecond
on a CPU with numpy alone, and paraphrases land close ("Which city is she based in?" / "The
user lives in Lisbon.") where the hashing embedder sees no shared word. The model was trained
Matryoshka-style: its first 64 or 128 dimensions are a smaller embedding of their own
(`search.embedding_dimension`).

Nothing is ever downloaded. WordLlama's loader looks for the packaged tokenizer under
`wordllama/tokenizer/` while the wheel holds it under `wordllama/tokenizers/`, and on a miss it
fetches from Hugging Face. Its second place to look is `<cache_dir>/tokenizers/`, so the
package's own directory is given as the cache directory, with downloads disabled: the packaged
files are found, and a missing one is a `FileNotFoundError` at load, never a request.

Loaded once per process and dimension (`load_wordllama`): the index's embedder and dedupe's
share the weights, which are only ever read.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from wordllama import WordLlamaInference

__all__ = ["WORDLLAMA_DIMENSIONS", "WORDLLAMA_MODEL", "WordLlamaEmbedder", "load_wordllama"]

WORDLLAMA_MODEL: Final = "l2_supercat"  # the model the wheel ships
WORDLLAMA_DIMENSIONS: Final = (64, 128, 256)  # its full size and its Matryoshka truncations
_FULL_DIMENSION = 256
_BATCH = 256  # texts tokenised and pooled at once: bounds the padded token matrix


def _import_wordllama() -> Path:
    """Import wordllama and return its package directory. Its `__init__` calls
    `logging.basicConfig(level=INFO)`, which would print every library's INFO records on
    stderr: the root logger is put back as it was."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    import wordllama

    root.handlers[:] = handlers
    root.setLevel(level)
    return Path(wordllama.__file__).parent


@functools.cache
def load_wordllama(dimension: int) -> WordLlamaInference:
    """The packaged model at `dimension` (64, 128 or 256), from the wheel's own files."""
    if dimension not in WORDLLAMA_DIMENSIONS:
        raise ValueError(f"WordLlama dimension must be one of {WORDLLAMA_DIMENSIONS}")
    package = _import_wordllama()
    from wordllama import WordLlama

    return WordLlama.load(
        WORDLLAMA_MODEL,
        cache_dir=package,  # <package>/tokenizers/ and <package>/weights/: the wheel's files
        dim=_FULL_DIMENSION,
        trunc_dim=None if dimension == _FULL_DIMENSION else dimension,
        disable_download=True,
    )


class WordLlamaEmbedder:
    """Mean-pooled WordLlama token embeddings, L2-normalised (zero rows for no tokens)."""

    def __init__(self, dimension: int = _FULL_DIMENSION) -> None:
        self._model = load_wordllama(dimension)
        self._dimension = dimension

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if not texts:
            return np.zeros((0, self._dimension), dtype=np.float32)
        # Texts of like length batched together: each batch is padded to its longest text.
        order = np.argsort([len(text) for text in texts], kind="stable")
        pooled = np.empty((len(texts), self._dimension), dtype=np.float32)
        pooled[order] = self._model.embed([texts[i] for i in order], norm=False, batch_size=_BATCH)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.asarray(pooled / np.where(norms == 0.0, 1.0, norms), dtype=np.float32)
