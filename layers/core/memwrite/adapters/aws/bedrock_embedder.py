"""`Embedder` on Amazon Bedrock: Titan Text Embeddings v2 (`amazon.titan-embed-text-v2:0`).

One `InvokeModel` per text (Titan v2 takes one `inputText` per call) with the configured
`dimensions` (256, 512 or 1024) and `normalize`. The port promises unit vectors, so rows are
L2-normalised here as well (a no-op when Titan already normalised them). Throttling and 5xx
are retried by botocore (standard mode); what is left is `EmbedderUnavailable`, which fails
the HyPE record so that the stream retries it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from memwrite.errors import ConfigError, EmbedderUnavailable

__all__ = ["TITAN_V2", "BedrockEmbedder", "bedrock_runtime_client"]

TITAN_V2 = "amazon.titan-embed-text-v2:0"
_CONFIG = Config(
    retries={"max_attempts": 4, "mode": "standard"}, connect_timeout=2, read_timeout=10
)


class BedrockEmbedder:
    def __init__(
        self,
        client: Any,
        *,
        model_id: str = TITAN_V2,
        dimension: int = 1024,
        normalize: bool = True,
    ) -> None:
        """`client`: a `bedrock-runtime` client (see `bedrock_runtime_client`)."""
        self._client = client
        self._model_id = model_id
        self._dimension = dimension
        self._normalize = normalize

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        rows = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            if text.strip():  # Titan refuses empty input; no words embeds to zero (the port)
                rows[row] = self._embed_one(text)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        np.divide(rows, norms, out=rows, where=norms > 0)
        return rows

    def _embed_one(self, text: str) -> npt.NDArray[np.float32]:
        body = {"inputText": text, "dimensions": self._dimension, "normalize": self._normalize}
        try:
            response = self._client.invoke_model(
                modelId=self._model_id,
                body=json.dumps(body),
                contentType="application/json",
                accept="application/json",
            )
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "Unknown")
            raise EmbedderUnavailable(f"Bedrock InvokeModel failed: {code}") from exc
        except BotoCoreError as exc:  # timeouts, connection errors
            raise EmbedderUnavailable(f"Bedrock unreachable: {type(exc).__name__}") from exc
        embedding = json.loads(response["body"].read())["embedding"]
        vector = np.asarray(embedding, dtype=np.float32)
        if vector.shape != (self._dimension,):
            # The model and the configured dimension disagree: no retry can fix that.
            raise ConfigError(
                f"Bedrock returned {vector.shape[0]} dimensions, expected {self._dimension}"
            )
        return vector


def bedrock_runtime_client(region: str, endpoint_url: str | None = None) -> Any:
    import boto3

    kwargs: dict[str, Any] = {"config": _CONFIG, "region_name": region}
    if endpoint_url:
        kwargs["endpoint_url"] = endpoint_url
    return boto3.client("bedrock-runtime", **kwargs)
