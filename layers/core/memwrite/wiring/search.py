"""The search side the settings name: the index's embedder (Titan v2 on Bedrock, or offline)
and the search index (OpenSearch when an endpoint is configured, else the embedded one). Each
adapter is imported inside the function that builds it, as `memwrite.wiring.backends` does."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from memwrite.config.environment import LambdaEnvironment

if TYPE_CHECKING:
    from memwrite.adapters.aws.opensearch_index import OpenSearchIndex
    from memwrite.model_ports import Embedder
    from memwrite.ports import MemoryIndex

__all__ = ["build_embedder", "build_index", "offline_embedder", "opensearch_index"]


def build_embedder(env: LambdaEnvironment) -> Embedder:
    """The index's embedder: Titan v2 on Bedrock, or WordLlama or hashing offline."""
    search = env.settings.pipeline.search
    if search.embedder == "bedrock":
        from memwrite.adapters.aws.bedrock_embedder import BedrockEmbedder, bedrock_runtime_client

        return BedrockEmbedder(
            bedrock_runtime_client(env.aws_region, env.aws_endpoint_url),
            model_id=search.bedrock_model,
            dimension=search.dimension,
            normalize=search.embedding_normalize,
        )
    return offline_embedder(search.embedder, search.dimension)


def offline_embedder(name: Literal["wordllama", "hashing"], dimension: int | None) -> Embedder:
    """An embedder that never leaves the process: WordLlama's packaged model (at `dimension`,
    None: its full 256) or the hashing embedder (always 384)."""
    if name == "wordllama":
        from memwrite.adapters.wordllama_embedder import WordLlamaEmbedder

        return WordLlamaEmbedder() if dimension is None else WordLlamaEmbedder(dimension)
    from memwrite.embedder import HashingEmbedder

    return HashingEmbedder()


def build_index(env: LambdaEnvironment, dimension: int) -> MemoryIndex:
    """OpenSearch when an endpoint is configured, else the embedded index (in a file:
    `LambdaEnvironment.embedded_index_path`)."""
    if env.opensearch_endpoint:
        return opensearch_index(env, env.opensearch_endpoint, dimension)
    from memwrite.adapters.sqlite.embedded_index import EmbeddedIndex

    search = env.settings.pipeline.search
    return EmbeddedIndex(
        env.embedded_index_path(),
        dimension=dimension,
        max_resident_partitions=search.embedded_max_resident_partitions,
    )


def opensearch_index(env: LambdaEnvironment, endpoint: str, dimension: int) -> OpenSearchIndex:
    from memwrite.adapters.aws.opensearch_index import OpenSearchIndex, signed_client
    from memwrite.read.query import memory_fusion

    client = signed_client(endpoint, env.aws_region, env.opensearch_service)
    return OpenSearchIndex(
        client,
        env.opensearch_index,
        dimension=dimension,
        pipeline_fusion=memory_fusion(env.settings.pipeline),
        serverless=env.opensearch_service == "aoss",
    )
