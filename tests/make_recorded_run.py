"""The example recording in `tests/recorded/runs/`, made the way a real one is.

`python -m tests.make_recorded_run` runs `memwrite eval --llm --record` on a small CRI data set
against a local fake Anthropic API (`tests.fake_anthropic`) that answers with the recorded
replies of `tests/recorded/anthropic/`: the recorder, the CLI flag and the recording's format
are exercised end to end, without an API key. Re-run it when a prompt changes (the replay test
then names the requests it no longer finds); a real recording is re-made with a real key.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from memwrite_local.cli import main
from memwrite_local.runtime.backend import patched_environ
from tests.fake_anthropic import canned_answer, serving

RUNS = Path(__file__).parent / "recorded" / "runs"
EXAMPLE = "lisbon-cilantro"
# Beyond the rule fast-path: extracting it takes the model (recorded: Lisbon, cilantro).
MESSAGES = [
    ("user", "Since last month Lisbon has been home, and cilantro ruins every dish for me."),
    ("assistant", "Noted! Lisbon is lovely; I will keep cilantro out of recipe ideas."),
    ("user", "Thanks, that was helpful."),
]


def write_dataset(directory: Path) -> Path:
    """The example conversation as a CRI data set (no ground truth: nothing is scored)."""
    dataset = directory / EXAMPLE
    dataset.mkdir(parents=True)
    lines = [
        {
            "message_id": number,
            "role": role,
            "content": content,
            "timestamp": f"2025-03-14T10:00:{number:02d}Z",
            "session_id": "session-1",
        }
        for number, (role, content) in enumerate(MESSAGES, start=1)
    ]
    text = "".join(json.dumps(line) + "\n" for line in lines)
    (dataset / "conversations.jsonl").write_text(text, encoding="utf-8")
    (dataset / "ground_truth.json").write_text("{}\n", encoding="utf-8")
    return dataset


def record_example(record_dir: Path) -> int:
    """`memwrite eval --llm --record record_dir` on the example, against the fake API."""
    with (
        tempfile.TemporaryDirectory(prefix="memwrite-example-") as scratch,
        serving(canned_answer) as fake,
    ):
        dataset = write_dataset(Path(scratch))
        env = {"ANTHROPIC_API_KEY": "sk-ant-fake-example", "ANTHROPIC_BASE_URL": fake.url}
        with patched_environ(env):
            return main(
                [
                    *("eval", "--format", "cri", str(dataset), "--llm", "--json"),
                    *("--record", str(record_dir), "--charts", str(Path(scratch) / "charts")),
                ]
            )


if __name__ == "__main__":
    sys.exit(record_example(RUNS))
