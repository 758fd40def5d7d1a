"""Episodes: the backfill that distils the user's words kept when extraction deferred them
(docs/design.md §10) once a model is available; the episode itself is
`memwrite.episode`."""
