"""Picks concrete adapters for each handler from the validated Lambda environment: the one
place outside handlers that does. `backends`: the adapters of each backend (`Adapters`) and the
model clients the settings name; `search`: the embedder and index they name; `function_deps`:
what each function is given, built from them (a stage's deps by its own `build_deps`, named by
its `StageDef`).
"""

from memwrite.wiring.backends import Adapters, build_llm, local_backfill_jobs
from memwrite.wiring.function_deps import (
    ApiFunctionDeps,
    DeadLetterDeps,
    DispatchDeps,
    IndexSetupDeps,
    PreFilterFunctionDeps,
    build_api_function_deps,
    build_api_key_store,
    build_api_key_table,
    build_backfill_deps,
    build_backfill_starter,
    build_batch_deps,
    build_dead_letter_deps,
    build_dispatch_deps,
    build_expiry_deps,
    build_index_setup,
    build_memory_store,
    build_metering,
    build_pre_filter_function_deps,
    build_queue_consumer,
    build_replay_deps,
    build_stage_deps,
    build_topic_sweep_deps,
    build_webhook_delivery_deps,
)
from memwrite.wiring.search import build_embedder, build_index

__all__ = [
    "Adapters",
    "ApiFunctionDeps",
    "DeadLetterDeps",
    "DispatchDeps",
    "IndexSetupDeps",
    "PreFilterFunctionDeps",
    "build_api_function_deps",
    "build_api_key_store",
    "build_api_key_table",
    "build_backfill_deps",
    "build_backfill_starter",
    "build_batch_deps",
    "build_dead_letter_deps",
    "build_dispatch_deps",
    "build_embedder",
    "build_expiry_deps",
    "build_index",
    "build_index_setup",
    "build_llm",
    "build_memory_store",
    "build_metering",
    "build_pre_filter_function_deps",
    "build_queue_consumer",
    "build_replay_deps",
    "build_stage_deps",
    "build_topic_sweep_deps",
    "build_webhook_delivery_deps",
    "local_backfill_jobs",
]
