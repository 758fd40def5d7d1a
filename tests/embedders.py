"""Embedders for tests that need a similarity chosen, not computed."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt


class FixedSimilarityEmbedder:
    """Puts the first text at cosine similarity `similarity` to every other text."""

    def __init__(self, similarity: float) -> None:
        self._other = [similarity, math.sqrt(1.0 - similarity**2)]

    @property
    def dimension(self) -> int:
        return 2

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        rows = [[1.0, 0.0], *([self._other] * (len(texts) - 1))]
        return np.array(rows, dtype=np.float32)
