"""`HashingEmbedder`: a lexical text embedder in numpy alone (the port is
`memwrite.ports.Embedder`).

It embeds for the search index when `search.embedder` is `hashing` (the embedded default is
WordLlama, `memwrite.adapters.wordllama_embedder`; AWS uses Titan on Bedrock), and it is
dedupe's similarity measure when `dedupe.embedder` is `hashing`, as on AWS, whose Lambda layer
does not carry WordLlama. It is feature hashing (the "hashing trick") of word unigrams, word
bigrams and character trigrams: lexical, not semantic, but deterministic across processes and
machines, with no model file at all.

numpy by hand rather than scikit-learn's `HashingVectorizer`: scikit-learn would add scipy and
~150 MB to a Lambda layer for a few dozen lines, and its sparse output would still need
densifying and normalising to fit this port.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import re
import unicodedata
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["DEFAULT_DIMENSION", "HashingEmbedder"]

DEFAULT_DIMENSION = 384

# Relative weight of each feature family. Each family's weights are L2-normalised before they
# are combined, so the many character trigrams cannot drown the words; cosine similarity is
# then close to a weighted mean of the per-family similarities.
_UNIGRAM_WEIGHT = 1.0
_BIGRAM_WEIGHT = 0.3
_TRIGRAM_WEIGHT = 0.5
# Function words (and "user": memories are phrased "The user ...") carry little meaning, so
# they count for less among the unigrams and do not form character trigrams. Without this,
# "The user lives in Berlin." and "... in Lisbon." share most of their weight.
_FUNCTION_WORD_WEIGHT = 0.2
_FUNCTION_WORDS = frozenset(
    {
        *("a", "an", "the", "and", "or", "but", "of", "to", "in", "on", "at", "by", "for"),
        *("from", "with", "as", "is", "are", "was", "were", "be", "been", "being", "am", "do"),
        *("does", "did", "has", "have", "had", "it", "its", "this", "that", "these", "those"),
        *("there", "their", "they", "them", "he", "she", "his", "her", "him", "i", "me", "my"),
        *("we", "our", "you", "your", "user", "users"),
    }
)

_WORD_RE = re.compile(r"[^\W_]+")
_CACHE_SIZE = 1 << 16  # distinct words and bigrams memoised; a working vocabulary fits

_UNIGRAM, _BIGRAM, _TRIGRAM = 0, 1, 2
_FAMILY_WEIGHTS = np.array([_UNIGRAM_WEIGHT, _BIGRAM_WEIGHT, _TRIGRAM_WEIGHT])

# One hashed feature of one text: (family, 64-bit hash, scale).
_Feature = tuple[int, int, float]
_FEATURE_DTYPE = np.dtype([("family", np.int64), ("hash", np.uint64), ("scale", np.float64)])


def _stable_hash(feature: str) -> int:
    """A 64-bit hash that is the same in every process (Python's `hash()` is salted)."""
    return int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _word_features(word: str) -> tuple[_Feature, ...]:
    """The unigram of `word` and its character trigrams (none for function words)."""
    if word in _FUNCTION_WORDS:
        return ((_UNIGRAM, _stable_hash(f"w:{word}"), _FUNCTION_WORD_WEIGHT),)
    padded = f"<{word}>"  # boundary marks: prefixes and suffixes are features too
    trigrams = tuple(
        (_TRIGRAM, _stable_hash(f"c:{padded[i : i + 3]}"), 1.0) for i in range(len(padded) - 2)
    )
    return ((_UNIGRAM, _stable_hash(f"w:{word}"), 1.0), *trigrams)


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _bigram_feature(first: str, second: str) -> _Feature:
    return (_BIGRAM, _stable_hash(f"b:{first} {second}"), 1.0)


def _text_features(text: str) -> list[_Feature]:
    words = _WORD_RE.findall(unicodedata.normalize("NFKC", text).casefold())
    features = [feature for word in words for feature in _word_features(word)]
    features.extend(_bigram_feature(a, b) for a, b in itertools.pairwise(words))
    return features


class HashingEmbedder:
    """Deterministic feature-hashing embedder: signed buckets, sublinear tf, unit rows."""

    def __init__(self, dimension: int = DEFAULT_DIMENSION) -> None:
        if dimension < 1:
            raise ValueError(f"dimension must be positive, got {dimension}")
        self._dimension = dimension

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        rows: list[int] = []
        features: list[_Feature] = []
        for row, text in enumerate(texts):
            found = _text_features(text)
            rows.extend([row] * len(found))
            features.extend(found)
        if not features:
            return np.zeros((len(texts), self._dimension), dtype=np.float32)
        table = np.fromiter(features, dtype=_FEATURE_DTYPE, count=len(features))
        return self._assemble(
            n=len(texts),
            rows=np.array(rows, dtype=np.int64),
            families=table["family"],
            hashes=table["hash"],
            scales=table["scale"],
        )

    def _assemble(
        self,
        n: int,
        rows: npt.NDArray[np.int64],
        families: npt.NDArray[np.int64],
        hashes: npt.NDArray[np.uint64],
        scales: npt.NDArray[np.float64],
    ) -> npt.NDArray[np.float32]:
        """Count each (text, feature), weigh and normalise per family, hash into buckets."""
        order = np.lexsort((hashes, rows))
        rows, families, hashes, scales = rows[order], families[order], hashes[order], scales[order]
        first = np.ones(len(rows), dtype=bool)
        first[1:] = (rows[1:] != rows[:-1]) | (hashes[1:] != hashes[:-1])
        starts = np.flatnonzero(first)
        tf = np.diff(np.append(starts, len(rows)))
        rows, families, hashes = rows[starts], families[starts], hashes[starts]
        weights = (1.0 + np.log(tf)) * scales[starts]  # sublinear tf
        group = rows * len(_FAMILY_WEIGHTS) + families
        norms = np.sqrt(np.bincount(group, weights=weights**2))
        weights = weights / norms[group] * _FAMILY_WEIGHTS[families]
        # The low bits pick the bucket, the top bit the sign, so collisions cancel on average
        # instead of piling up (Weinberger et al., 2009).
        buckets = (hashes % np.uint64(self._dimension)).astype(np.int64)
        signs = np.where(hashes >> np.uint64(63), -1.0, 1.0)
        matrix = np.bincount(
            rows * self._dimension + buckets, weights=signs * weights, minlength=n * self._dimension
        ).reshape(n, self._dimension)
        row_norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return (matrix / np.where(row_norms == 0.0, 1.0, row_norms)).astype(np.float32)
