"""Config defaults and tenant overrides; content-addressed ids."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from memwrite.config import Settings, TenantOverrides, UserSkipPattern, load_settings
from memwrite.errors import ConfigError
from memwrite.ids import trace_id_for_key, turn_id


def test_defaults_are_the_seeds() -> None:
    prefilter = Settings().pipeline.prefilter
    assert prefilter.min_words == 3
    assert prefilter.extract_from_assistant is False
    assert prefilter.rate_limit_window_secs == 60
    assert prefilter.rate_map_max_entries == 10_000
    assert prefilter.user_skip_patterns == ()


def test_tenant_and_agent_overrides_apply_only_to_them() -> None:
    # Given a tenant that lowers min_words and lets one agent's assistant turns through
    settings = Settings(
        tenants={
            "acme": TenantOverrides(
                min_words=1,
                user_skip_patterns=(UserSkipPattern(name="sig", pattern="--.*"),),
                agents={"scribe": {"extract_from_assistant": True}},  # type: ignore[dict-item]
            )
        }
    )
    # Then acme's requests see the override, other tenants the defaults
    assert settings.for_request("acme").prefilter.min_words == 1
    assert settings.for_request("acme").prefilter.extract_from_assistant is False
    assert settings.for_request("acme", "scribe").prefilter.extract_from_assistant is True
    assert settings.for_request("other").prefilter.min_words == 3
    assert settings.for_request("acme").prefilter.user_skip_patterns[0].name == "sig"


def test_settings_load_from_file_and_env(tmp_path: Path) -> None:
    path = tmp_path / "memwrite.json"
    path.write_text(json.dumps({"pipeline": {"prefilter": {"min_words": 5}}}))
    settings = load_settings({"MEMWRITE_CONFIG": str(path), "MEMWRITE_API_KEYS": "k1=t1,k2=t2"})
    assert settings.pipeline.prefilter.min_words == 5
    assert settings.api_keys == {"k1": "t1", "k2": "t2"}


@pytest.mark.parametrize(
    "environ",
    [
        {"MEMWRITE_API_KEYS": "no-equals-sign"},
        {"MEMWRITE_CONFIG": "/nonexistent/memwrite.json"},
    ],
)
def test_bad_settings_fail_with_config_error(environ: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        load_settings(environ)


def test_unknown_config_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "memwrite.json"
    path.write_text(json.dumps({"pipeline": {"prefilter": {"min_wrods": 5}}}))
    with pytest.raises(ConfigError, match="min_wrods"):
        load_settings({"MEMWRITE_CONFIG": str(path)})


def test_turn_id_is_content_addressed_and_scoped() -> None:
    said = "I live in Berlin"
    at = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    base = turn_id("acme", "dana", "s1", "user", said, timestamp=at)
    assert base == turn_id("acme", "dana", "s1", "user", said, timestamp=at)
    assert len(base) == 32
    assert base != turn_id("other", "dana", "s1", "user", said, timestamp=at)
    assert base != turn_id("acme", "sam", "s1", "user", said, timestamp=at)
    assert base != turn_id("acme", "dana", "s2", "user", said, timestamp=at)
    assert base != turn_id("acme", "dana", "s1", "assistant", said, timestamp=at)
    assert base != turn_id("acme", "dana", "s1", "user", said, timestamp=at + timedelta(days=90))
    assert base != turn_id("acme", "dana", "s1", "user", said, timestamp=None)
    # The same instant written in another offset is the same turn.
    in_lisbon_summer = at.astimezone(timezone(timedelta(hours=1)))
    assert base == turn_id("acme", "dana", "s1", "user", said, timestamp=in_lisbon_summer)
    # Field boundaries cannot be shifted to forge a collision.
    assert turn_id("a", "u", "bc", "user", "x", timestamp=None) != turn_id(
        "a", "u", "b", "cuser", "x", timestamp=None
    )


def test_trace_id_of_an_idempotency_key_is_stable_per_tenant() -> None:
    assert trace_id_for_key("acme", "req-1") == trace_id_for_key("acme", "req-1")
    assert trace_id_for_key("acme", "req-1") != trace_id_for_key("other", "req-1")
