"""Secrets read at run time from Secrets Manager, never from the environment: the function's
environment names the secret (`ANTHROPIC_API_KEY_SECRET`), and only the functions that call
the model may read it. Powertools parameters keeps the value for `SECRET_MAX_AGE_SECS`, so a
rotated key reaches a warm function within that period."""

from __future__ import annotations

from aws_lambda_powertools.utilities.parameters import get_secret

__all__ = ["SECRET_MAX_AGE_SECS", "read_secret"]

SECRET_MAX_AGE_SECS = 300


def read_secret(name: str) -> str:
    """The secret's string value (by name or ARN), cached for `SECRET_MAX_AGE_SECS`."""
    return str(get_secret(name, max_age=SECRET_MAX_AGE_SECS))
