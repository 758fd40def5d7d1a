"""The read side: search, one memory with its history, a user's memories and episodes page by
page (`query`), traces (`traces`) and a user's pending episodes (`pending`). What changes stored
memories is `memwrite.edit`; replay is `memwrite.replay`."""
