"""Episodes: the user's words kept when extraction deferred them (DESIGN.md section 2,
"Episodes"), and the backfill that distils them once a model is available."""

from memwrite.episodes.model import (
    EPISODE_DOC_PREFIX,
    Episode,
    EpisodePage,
    EpisodeStatus,
    episode_doc_id,
    episode_of_doc_id,
)

__all__ = [
    "EPISODE_DOC_PREFIX",
    "Episode",
    "EpisodePage",
    "EpisodeStatus",
    "episode_doc_id",
    "episode_of_doc_id",
]
