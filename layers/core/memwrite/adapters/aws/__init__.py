"""AWS adapters: DynamoDB, SQS, Step Functions, Bedrock, CloudWatch EMF, OpenSearch."""
