"""The CDK app that deploys memwrite: `cdk synth -c env=dev|staging|prod` (see the README)."""
