"""The settings: pipeline config, tenant overrides, renamed keys, the Lambda environment and
model limits."""
