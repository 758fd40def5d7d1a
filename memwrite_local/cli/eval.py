"""The `memwrite eval` command: its arguments, and one run from data sets to report.

`memwrite eval --format locomo PATH... [--format cri PATH...] [--json] [--llm [--record DIR]]
[--k 5 10] [--charts DIR]`: each `--format` names the format of the paths after it, so one
command evaluates several data sets of either format. `--record DIR` keeps each run's model
answers with its inputs and outcome, replayable as a test (`memwrite_local.evaluation.recording`).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from memwrite_local.evaluation.data import DataFormat, DatasetData, read_dataset
from memwrite_local.evaluation.evaluate import DEFAULT_KS, LlmKeyMissing, RecordingExists, evaluate
from memwrite_local.evaluation.report import (
    DEFAULT_CHARTS_DIR,
    render_json,
    render_table,
    write_charts,
)
from memwrite_local.runtime.pipeline import IngestFailed

__all__ = ["add_eval_parser", "run_eval"]

_FORMATS = ", ".join(f.value for f in DataFormat)


class _FormatGroup(argparse.Action):
    """`--format FORMAT PATH...`, repeatable: collects (format, paths) in order."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        words = [str(value) for value in values or []]
        try:
            data_format = DataFormat(words[0])
        except ValueError:
            parser.error(f"--format: expected one of {_FORMATS}, got {words[0]!r}")
        groups = [
            *(getattr(namespace, self.dest) or []),
            (data_format, [Path(w) for w in words[1:]]),
        ]
        setattr(namespace, self.dest, groups)


def add_eval_parser(commands: Any) -> None:
    """Register `eval` on the CLI's subparsers."""
    parser = commands.add_parser(
        "eval",
        help="run LoCoMo or CRI data through the local pipeline and score the funnel",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--format",
        dest="groups",
        action=_FormatGroup,
        nargs="+",
        required=True,
        metavar=("FORMAT", "PATH"),
        help=f"the format ({_FORMATS}) of the data set paths that follow it (repeatable)",
    )
    parser.add_argument(
        "paths", nargs="*", type=Path, help="more paths, for a --format given without any"
    )
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--llm", action="store_true", help="extract with the configured model")
    parser.add_argument(
        "--record",
        type=Path,
        metavar="DIR",
        help="with --llm: write each run's model requests and answers, inputs and outcome "
        "under DIR, as tests replay them (one directory per run)",
    )
    parser.add_argument(
        "--k", nargs="+", type=int, default=list(DEFAULT_KS), help="recall@k cut-offs"
    )
    parser.add_argument(
        "--charts", type=Path, default=DEFAULT_CHARTS_DIR, help="where the PNG charts go"
    )


def _datasets(args: argparse.Namespace) -> list[DatasetData]:
    groups: list[tuple[DataFormat, list[Path]]] = args.groups
    bare = [paths for _, paths in groups if not paths]
    if len(bare) > 1 or (args.paths and not bare):
        raise ValueError("eval: give each --format its paths (--format locomo PATH ...)")
    if bare:
        if not args.paths:
            raise ValueError("eval: --format needs at least one path")
        bare[0].extend(args.paths)
    return [read_dataset(data_format, path) for data_format, paths in groups for path in paths]


def run_eval(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    if any(k < 1 for k in args.k):
        raise ValueError("eval: --k takes positive cut-offs")
    ks = sorted(set(args.k))
    datasets = _datasets(args)
    progress = not args.json and stderr.isatty()
    try:
        reports = evaluate(datasets, ks=ks, llm=args.llm, progress=progress, record=args.record)
    except (LlmKeyMissing, RecordingExists) as exc:
        stderr.write(f"memwrite eval: {exc}\n")
        return 2
    except IngestFailed as exc:
        stderr.write(f"memwrite eval: the ingest API refused a conversation: {exc}\n")
        return 1
    charts = write_charts(reports, args.charts)
    if args.json:
        stdout.write(render_json(reports, charts) + "\n")
        return 0
    stdout.write(render_table(reports) + "\n\ncharts\n")
    stdout.writelines(f"  {path}\n" for path in charts)
    return 0
