"""Keys a pipeline config once had (docs/design.md §14): still read under their new name, with
a `DeprecationWarning` (`memwrite.config.settings.PipelineConfig` and a replay's override apply
it)."""

from __future__ import annotations

import warnings
from typing import Any

__all__ = ["RENAMED_KEYS", "renamed_keys"]

# Keys a config once had, by the key that replaced them: still read, with a DeprecationWarning.
RENAMED_KEYS: dict[str, str] = {"prefilter": "pre_filter"}  # the stage's package name


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
