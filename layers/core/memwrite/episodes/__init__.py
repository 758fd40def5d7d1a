"""Episodes: the backfill that distils the user's words kept when extraction deferred them
(DESIGN.md section 2, "Episodes") once a model is available; the episode itself is
`memwrite.episode`."""
