"""Config defaults and tenant overrides; content-addressed ids."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from memwrite.config.settings import Settings, load_settings
from memwrite.config.tenant_overrides import TenantOverrides, UserSkipPattern
from memwrite.errors import ConfigError, InvalidQuery
from memwrite.ids import trace_id_for_key, turn_id
from memwrite.replay import config_with


def test_defaults_are_the_seeds() -> None:
    pre_filter = Settings().pipeline.pre_filter
    assert pre_filter.min_words == 3
    assert pre_filter.extract_from_assistant is False
    assert pre_filter.rate_limit_window_secs == 60
    assert pre_filter.rate_map_max_entries == 10_000
    assert pre_filter.user_skip_patterns == ()


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
    assert settings.for_request("acme").pre_filter.min_words == 1
    assert settings.for_request("acme").pre_filter.extract_from_assistant is False
    assert settings.for_request("acme", "scribe").pre_filter.extract_from_assistant is True
    assert settings.for_request("other").pre_filter.min_words == 3
    assert settings.for_request("acme").pre_filter.user_skip_patterns[0].name == "sig"


def test_settings_load_from_file_and_env(tmp_path: Path) -> None:
    path = tmp_path / "memwrite.json"
    path.write_text(json.dumps({"pipeline": {"pre_filter": {"min_words": 5}}}))
    settings = load_settings({"MEMWRITE_CONFIG": str(path), "MEMWRITE_API_KEYS": "k1=t1,k2=t2"})
    assert settings.pipeline.pre_filter.min_words == 5
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
    path.write_text(json.dumps({"pipeline": {"pre_filter": {"min_wrods": 5}}}))
    with pytest.raises(ConfigError, match="min_wrods"):
        load_settings({"MEMWRITE_CONFIG": str(path)})


_PRE_FILTER = {"min_words": 5, "rate_limit_window_secs": 30, "allowed_pii": ["email"]}


def test_the_old_pre_filter_key_still_loads_with_a_deprecation_warning(tmp_path: Path) -> None:
    # Given a config file written before the section took the stage's name
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps({"pipeline": {"prefilter": _PRE_FILTER}}))
    new.write_text(json.dumps({"pipeline": {"pre_filter": _PRE_FILTER}}))
    # When it is loaded
    with pytest.warns(DeprecationWarning, match="'prefilter' is deprecated: name it 'pre_filter'"):
        loaded = load_settings({"MEMWRITE_CONFIG": str(old)})
    # Then it holds the same values as the file that names the section `pre_filter`
    assert loaded == load_settings({"MEMWRITE_CONFIG": str(new)})
    assert loaded.pipeline.pre_filter.min_words == 5


def test_both_pre_filter_keys_at_once_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "memwrite.json"
    both = {"prefilter": _PRE_FILTER, "pre_filter": {"min_words": 2}}
    path.write_text(json.dumps({"pipeline": both}))
    with pytest.raises(ConfigError, match="both 'prefilter' and 'pre_filter'"):
        load_settings({"MEMWRITE_CONFIG": str(path)})


def test_a_replay_override_may_still_name_the_old_key() -> None:
    base = Settings().pipeline
    with pytest.warns(DeprecationWarning):
        changed = config_with(base, {"prefilter": {"min_words": 7}})
    assert changed == config_with(base, {"pre_filter": {"min_words": 7}})
    with pytest.raises(InvalidQuery, match="both"):
        config_with(base, {"prefilter": {"min_words": 7}, "pre_filter": {"min_words": 7}})


def test_a_retired_key_is_ignored_with_a_deprecation_warning(tmp_path: Path) -> None:
    # Given a config file that still sets a key the embedded index no longer reads
    path = tmp_path / "memwrite.json"
    search = {"embedded_max_open_partitions": 64, "embedded_max_resident_partitions": 9}
    path.write_text(json.dumps({"pipeline": {"search": search}}))
    # When it is loaded, it starts, saying the key is ignored and why
    with pytest.warns(DeprecationWarning, match="search.embedded_max_open_partitions is ignored"):
        loaded = load_settings({"MEMWRITE_CONFIG": str(path)})
    # And the section's other keys still apply
    assert loaded.pipeline.search.embedded_max_resident_partitions == 9
    with pytest.warns(DeprecationWarning, match="is ignored"):
        replayed = config_with(Settings().pipeline, {"search": search})
    assert replayed.search.embedded_max_resident_partitions == 9


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
