"""A DynamoDB table's stream under moto, read back as the Lambda event source delivers it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import boto3


def stream_event(table_name: str, region: str | None = None) -> dict[str, Any]:
    """Every record of `table_name`'s stream so far, as a DynamoDB Streams Lambda event."""
    table = boto3.client("dynamodb", region_name=region).describe_table(TableName=table_name)
    stream_arn = table["Table"]["LatestStreamArn"]
    streams = boto3.client("dynamodbstreams", region_name=region)
    shards = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]
    records: list[dict[str, Any]] = []
    for shard in shards["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        for record in streams.get_records(ShardIterator=iterator)["Records"]:
            created = record["dynamodb"].get("ApproximateCreationDateTime")
            if isinstance(created, datetime):
                record["dynamodb"]["ApproximateCreationDateTime"] = created.timestamp()
            records.append({**record, "eventSourceARN": stream_arn})
    return {"Records": records}
