"""`memwrite loadtest`: the real pipeline under a scaled day of traffic (docs/loadtest.md).

`traffic` makes the requests from real conversations, `model_server` is the fake Anthropic API
with a real account's rate limits (and the Message Batches API), `clock` the simulated time,
`simulator` the run (the coordinator), `workers` the processes it spreads the pipeline's work
over, `probe` reads what the run left in the SQLite file, `report` the fields
of the report, `standard` the set `make loadtest` runs.
"""
