"""What `memwrite eval` shows: a table of the data sets side by side, the JSON document, and
two PNG charts per data set (the funnel per stage, the rejections per reason)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from memwrite_local.evaluation.evaluate import DatasetReport

__all__ = ["DEFAULT_CHARTS_DIR", "render_json", "render_table", "write_charts"]

DEFAULT_CHARTS_DIR = Path("bench/eval")
_UNSAFE_FILE = re.compile(r"[^A-Za-z0-9_.-]+")
_MAX_REASONS = 15  # bars in a rejections chart; the rest are summed into one


def render_json(reports: Sequence[DatasetReport], charts: Sequence[Path]) -> str:
    datasets = [report.model_dump(mode="json") for report in reports]
    return json.dumps({"datasets": datasets, "charts": [str(path) for path in charts]})


def _number(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,}" if isinstance(value, int) else f"{value:,.3f}"


def _k_cells(ks: dict[str, float | None]) -> str:
    return " / ".join(_number(value) for value in ks.values())


_Row = tuple[str, Callable[[DatasetReport], str]]
"""A table row: its label, and its cell of one data set."""

_ROWS: tuple[_Row, ...] = (
    ("extractor", lambda r: r.extractor),
    ("conversations (runs: one per speaker)", lambda r: f"{r.conversations} ({r.runs})"),
    ("turns in (summed over runs)", lambda r: _number(r.turns)),
    ("fact-bearing user turns", lambda r: _number(r.fact_bearing_turns)),
    ("  kept by the pre-filter (recall)", lambda r: _number(r.fact_bearing_recall)),
    ("turns deferred (no LLM)", lambda r: _number(r.deferred_turns)),
    ("LLM calls per turn", lambda r: _number(r.llm_calls_per_turn)),
    ("failed turns", lambda r: _number(r.failed_turns)),
    ("candidates", lambda r: _number(r.candidates)),
    ("items stored (memories + episodes)", lambda r: _number(r.items_stored)),
    ("  memories", lambda r: _number(r.items_by_kind.get("memory", 0))),
    ("    active", lambda r: _number(r.active_memories)),
    ("  episodes", lambda r: _number(r.items_by_kind.get("episode", 0))),
    ("memories per 1,000 turns", lambda r: _number(r.memories_per_1000_turns)),
    ("supersessions", lambda r: _number(r.supersessions)),
    ("tokens per 1,000 turns", lambda r: _number(r.tokens_per_1000_turns)),
    ("USD per 1,000 turns", lambda r: _number(r.cost_usd_per_1000_turns)),
    ("QA items searched", lambda r: _number(r.qa_items)),
)


def _recall_rows(reports: Sequence[DatasetReport]) -> list[_Row]:
    ks = "/".join(reports[0].recall_at_k)
    return [
        (f"recall@{ks}: memwrite", lambda r: _k_cells(r.recall_at_k)),
        (f"recall@{ks}: memories only", lambda r: _k_cells(r.recall_at_k_memories_only)),
        (f"recall@{ks}: raw turns + BM25", lambda r: _k_cells(r.baseline_raw_bm25_recall_at_k)),
        ("  baseline items stored", lambda r: _number(r.baseline_items_stored)),
    ]


def _cri_rows(reports: Sequence[DatasetReport]) -> list[_Row]:
    if not any(report.cri for report in reports):
        return []
    return [
        (
            "CRI changes: new active, old superseded",
            lambda r: (
                f"{r.cri.changes_new_active_old_superseded} of {r.cri.changes}" if r.cri else ""
            ),
        ),
        (
            "CRI noise examples that made a memory",
            lambda r: (
                f"{r.cri.noise_examples_with_memory} of {r.cri.noise_examples}" if r.cri else ""
            ),
        ),
    ]


def _dropped_rows(reports: Sequence[DatasetReport]) -> list[_Row]:
    stages = [s for s in reports[0].dropped_by_stage if any(r.dropped_by_stage[s] for r in reports)]
    reasons = list(dict.fromkeys(label for r in reports for label in r.dropped_by_reason))
    rows: list[_Row] = [("turns dropped, per stage", _blank)]
    rows += [(f"  {stage}", _dropped_at(stage)) for stage in stages]
    rows.append(("turns dropped, per reason", _blank))
    rows += [(f"  {label}", _dropped_for(label)) for label in reasons]
    return rows


def _blank(_: DatasetReport) -> str:
    return ""


def _dropped_at(stage: str) -> Callable[[DatasetReport], str]:
    return lambda report: _number(report.dropped_by_stage.get(stage, 0))


def _dropped_for(label: str) -> Callable[[DatasetReport], str]:
    return lambda report: _number(report.dropped_by_reason.get(label, 0))


def render_table(reports: Sequence[DatasetReport]) -> str:
    """One column per data set, one row per measure."""
    rows = [*_ROWS, *_recall_rows(reports), *_cri_rows(reports), *_dropped_rows(reports)]
    cells = [[render(report) for report in reports] for _, render in rows]
    label_width = max(len(label) for label, _ in rows)
    widths = [
        max(len(report.name), *(len(row[i]) for row in cells)) for i, report in enumerate(reports)
    ]
    header = " " * label_width + "".join(
        f"  {r.name:>{w}}" for r, w in zip(reports, widths, strict=True)
    )
    lines = [header]
    for (label, _), row in zip(rows, cells, strict=True):
        values = "".join(f"  {cell:>{w}}" for cell, w in zip(row, widths, strict=True))
        lines.append(f"{label:<{label_width}}{values}".rstrip())
    return "\n".join(lines)


def _file_stem(name: str) -> str:
    return _UNSAFE_FILE.sub("-", name).strip("-") or "dataset"


def _funnel_chart(report: DatasetReport, path: Path) -> None:
    import matplotlib.pyplot as plt

    remaining = [report.turns]
    for dropped in report.dropped_by_stage.values():
        remaining.append(remaining[-1] - dropped)
    labels = ["turns in", *(f"after {stage}" for stage in report.dropped_by_stage)]
    labels.append("memories stored")
    remaining.append(report.items_by_kind.get("memory", 0))
    figure, axes = plt.subplots(figsize=(9, 4.5))
    bars = axes.bar(labels, remaining, color="#4c72b0")
    axes.bar_label(bars, labels=[f"{n:,}" for n in remaining], fontsize=8)
    axes.set_ylabel("turns")
    axes.set_title(f"{report.name}: the funnel per stage ({report.extractor} extractor)")
    axes.tick_params(axis="x", labelrotation=30)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _rejections_chart(report: DatasetReport, path: Path) -> None:
    import matplotlib.pyplot as plt

    reasons = list(report.dropped_by_reason.items())
    if len(reasons) > _MAX_REASONS:
        rest = sum(count for _, count in reasons[_MAX_REASONS - 1 :])
        reasons = [*reasons[: _MAX_REASONS - 1], ("other reasons", rest)]
    labels = [label for label, _ in reversed(reasons)]
    counts = [count for _, count in reversed(reasons)]
    figure, axes = plt.subplots(figsize=(9, 0.4 * max(len(reasons), 3) + 1.5))
    bars = axes.barh(labels, counts, color="#dd8452")
    axes.bar_label(bars, labels=[f"{n:,}" for n in counts], fontsize=8)
    axes.set_xlabel("turns dropped")
    axes.set_title(f"{report.name}: rejections per reason")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def write_charts(reports: Sequence[DatasetReport], directory: Path) -> list[Path]:
    """`<data set>-funnel.png` and `<data set>-rejections.png` per data set, in `directory`."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for report in reports:
        stem = _file_stem(report.name)
        for suffix, draw in (("funnel", _funnel_chart), ("rejections", _rejections_chart)):
            path = directory / f"{stem}-{suffix}.png"
            draw(report, path)
            written.append(path)
    return written
