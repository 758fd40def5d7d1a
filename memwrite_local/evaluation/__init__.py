"""`memwrite eval`: data sets through the local pipeline, scored against what they know.

`data` reads LoCoMo and CRI into one typed model, `evaluate` runs and scores them, `baseline`
is the store-everything anchor (every turn raw, BM25), `report` prints the table, the JSON and
the charts, and `recording` keeps a run's model answers, replayable as a test.
"""
