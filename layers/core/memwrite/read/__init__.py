"""The read side: search, one memory with its history, a user's memories and episodes page by
page (`query`), and traces (`traces`). What changes stored memories is `memwrite.edit`; replay
is `memwrite.replay`."""
