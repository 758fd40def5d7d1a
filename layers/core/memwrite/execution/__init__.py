"""The state machine's entry and failure path: SQS batches to executions, and the dead letter."""
