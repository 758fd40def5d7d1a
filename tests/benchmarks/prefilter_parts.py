"""Where `memwrite prefilter`'s time goes, per LoCoMo-dev turn, part by part.

`python -m tests.benchmarks.prefilter_parts` times each part of the CLI's work alone over the
788 turns (CPU time, the minimum of 15 passes, in µs per turn), next to the floor `make bench`
compares it with. The parts overlap the whole only roughly: alone, each runs with warm caches.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable

from memwrite.config.settings import PreFilterConfig
from memwrite.ids import content_hash
from memwrite.pre_filter.checks import screen
from memwrite.pre_filter.firewall import normalise, scan
from memwrite.pre_filter.rate_gate import RateGate
from memwrite.pre_filter.skip_rules import match_skip_rule, plainly_kept
from memwrite.segment import Segment, sentences_of
from memwrite_local.cli.prefilter import run_prefilter
from tests.benchmarks.run import COMBINED_REGEX
from tests.datasets import load_locomo

PASSES = 15


def _us_per_turn(run: Callable[[], object], turns: int) -> float:
    run()
    samples = []
    for _ in range(PASSES):
        started = time.process_time()
        run()
        samples.append(time.process_time() - started)
    return min(samples) / turns * 1e6


def main() -> None:
    texts = [turn.text for turn in load_locomo()]
    config = PreFilterConfig()
    limit = config.short_meta_request_max_chars
    stdin = "".join(json.dumps({"role": "user", "content": text}) + "\n" for text in texts)
    lines = stdin.splitlines(keepends=True)
    sentences = [s for text in texts for s in sentences_of(normalise(text)) or []]
    judged = [Segment(s, 0, len(s)) for s in sentences if not plainly_kept(s, limit)]
    dropped = [s for s in judged if match_skip_rule(s, short_meta_max_chars=limit)]
    kept = [s for s in judged if not match_skip_rule(s, short_meta_max_chars=limit)]

    def floor() -> None:
        out = io.StringIO()
        for line in lines:
            record = json.loads(line)
            skip = COMBINED_REGEX.search(record["content"]) is not None
            decision = {"decision": "skip" if skip else "pass", "reason": None}
            out.write(json.dumps({**decision, "text": None if skip else record["content"]}) + "\n")

    def rate_gate() -> None:
        gate = RateGate(config.rate_map_max_entries)
        for text in texts:
            gate.admit(content_hash("cli", text.casefold()), text, 0.0, 60)

    parts: dict[str, Callable[[], object]] = {
        "memwrite prefilter (run_prefilter)": lambda: run_prefilter(
            io.StringIO(stdin), io.StringIO(), io.StringIO()
        ),
        "floor: JSON lines + one combined regex": floor,
        "  of which the regex": lambda: [COMBINED_REGEX.search(text) for text in texts],
        "  of which json.loads": lambda: [json.loads(line) for line in lines],
        "screen (the pre-filter without I/O and gates)": lambda: [
            screen(text, config) for text in texts
        ],
        "  firewall scan": lambda: [scan.__wrapped__(text) for text in texts],
        "  sentence split": lambda: [sentences_of(text) for text in texts],
        "  plainly_kept, every sentence": lambda: [plainly_kept(s, limit) for s in sentences],
        "  rule chain, sentences it drops": lambda: [
            match_skip_rule(s, short_meta_max_chars=limit) for s in dropped
        ],
        "  rule chain, sentences it keeps": lambda: [
            match_skip_rule(s, short_meta_max_chars=limit) for s in kept
        ],
        "rate key and rate gate": rate_gate,
    }
    print(
        f"{len(texts)} turns, {len(sentences)} sentences: {len(sentences) - len(judged)} "
        f"decided by plainly_kept, {len(dropped)} dropped and {len(kept)} kept by the rule chain"
    )
    for name, run in parts.items():
        print(f"{name:48s} {_us_per_turn(run, len(texts)):6.2f} µs/turn")


if __name__ == "__main__":
    main()
