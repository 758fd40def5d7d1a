"""Keys a pipeline config once had (docs/design.md §14): a renamed key is still read under its
new name, a retired one is ignored, each with a `DeprecationWarning`
(`memwrite.config.settings.PipelineConfig` and a replay's override apply both)."""

from __future__ import annotations

import warnings
from typing import Any

__all__ = ["RENAMED_KEYS", "RETIRED_KEYS", "renamed_keys", "without_retired_keys"]

# Keys a config once had, by the key that replaced them: still read, with a DeprecationWarning.
RENAMED_KEYS: dict[str, str] = {"prefilter": "pre_filter"}  # the stage's package name

# Keys that no longer do anything, by (section, key): ignored with a DeprecationWarning saying
# why, so that a config written for an earlier version still starts.
RETIRED_KEYS: dict[tuple[str, str], str] = {
    ("search", "embedded_max_open_partitions"): (
        "the embedded index keeps no FTS5 table per user to cap any more"
    ),
}


def renamed_keys(data: Any) -> Any:
    """`data` (a `pipeline` section as JSON) with every old key under its new name, each one
    found warned about; both names at once is a `ValueError`: which one was meant is unclear."""
    if not isinstance(data, dict) or not data.keys() & RENAMED_KEYS.keys():
        return data
    renamed = dict(data)
    for old, new in RENAMED_KEYS.items():
        if old not in renamed:
            continue
        if new in renamed:
            raise ValueError(f"both {old!r} and {new!r} are set: keep {new!r} alone")
        warnings.warn(
            f"the pipeline config key {old!r} is deprecated: name it {new!r}",
            DeprecationWarning,
            stacklevel=2,
        )
        renamed[new] = renamed.pop(old)
    return renamed


def without_retired_keys(data: Any) -> Any:
    """`data` (a `pipeline` section as JSON) without the retired keys, each one found warned
    about."""
    if not isinstance(data, dict):
        return data
    cleaned = data
    for (section, key), why in RETIRED_KEYS.items():
        part = cleaned.get(section)
        if not isinstance(part, dict) or key not in part:
            continue
        warnings.warn(
            f"the pipeline config key {section}.{key} is ignored: {why}",
            DeprecationWarning,
            stacklevel=2,
        )
        cleaned = {**cleaned, section: {k: v for k, v in part.items() if k != key}}
    return cleaned
