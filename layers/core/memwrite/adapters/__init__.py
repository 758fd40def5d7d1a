"""Adapters: the only code that touches boto3, opensearch-py or anthropic."""
