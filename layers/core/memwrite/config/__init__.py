"""The settings: pipeline config, its renamed keys, the Lambda environment, model limits."""
