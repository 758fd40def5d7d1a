"""The simulated traffic: real conversations replayed by many users of many tenants.

Scripts are the conversations of the evaluation data (`../shared/data`: LoCoMo and CRI, each
person's side of each conversation, `memwrite_local.evaluation`), or, in a clone without that
data, the sample conversations the repository ships (`events/conversations/`). Each simulated
user replays one script from a seeded starting point, a session at a time, as `POST /v1/turns`
requests of up to `TURNS_PER_REQUEST` turns (an agent sending what was said since its last call).

Arrivals are a Poisson process per tenant and minute whose rate follows the day (`diurnal`:
half the mean at 03:00, one and a half times it at 15:00); tenants have equal shares, and the
burst tenant (tenant 0) sends `burst_factor` times its share during the burst window, a tenth
of the run. `--turns-per-day` times `--scale` is the mean rate; the run starts at midnight.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = [
    "REPOSITORY",
    "TURNS_PER_REQUEST",
    "Request",
    "Script",
    "TrafficPlan",
    "diurnal",
    "generate",
    "load_scripts",
]

REPOSITORY = Path(__file__).resolve().parents[2]
SAMPLE_CONVERSATIONS = REPOSITORY / "events" / "conversations"
TURNS_PER_REQUEST = 10
REQUESTS_PER_USER_PER_DAY = 30  # how many users a tenant's traffic is spread over
DIURNAL_AMPLITUDE = 0.5  # the rate swings +-50 % around its mean over a day
PEAK_FACTOR = 1 + DIURNAL_AMPLITUDE
TURN_SPACING_S = 5  # the turns of one request, this far apart, the last at its arrival
BURST_WINDOW = (0.3, 0.4)  # of the run: where the burst tenant sends its burst
OUTAGE_START = 0.6  # of the run: where an injected outage begins

Script = list[list[tuple[str, str]]]  # sessions of (role, text)


@dataclass(frozen=True)
class Request:
    """One `POST /v1/turns` of one simulated user, at `at` (seconds into the run)."""

    at: float
    tenant: str
    user_id: str
    session_id: str
    turns: tuple[tuple[str, str], ...]

    def body(self, start: float) -> dict[str, Any]:
        arrival = start + self.at
        last = len(self.turns) - 1
        return {
            "user_id": self.user_id,
            "session_id": self.session_id,
            "turns": [
                {
                    "role": role,
                    "content": text,
                    "timestamp": _iso(arrival - (last - position) * TURN_SPACING_S),
                }
                for position, (role, text) in enumerate(self.turns)
            ],
        }


@dataclass(frozen=True)
class TrafficPlan:
    turns_per_day: float  # already scaled
    duration_s: float
    tenants: int
    burst_factor: float
    seed: int
    start_hour: float = 0.0  # the hour of the day the run starts at
    # A visit (up to TURNS_PER_REQUEST turns) is sent in requests of this many, each turn
    # TURN_SPACING_S after the last: an agent that sends every turn as it is said sends 1.
    turns_per_request: int = TURNS_PER_REQUEST

    @property
    def burst(self) -> tuple[float, float]:
        return (BURST_WINDOW[0] * self.duration_s, BURST_WINDOW[1] * self.duration_s)


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat().replace("+00:00", "Z")


def diurnal(second_of_day: float) -> float:
    """The day's shape of the rate, 1 on average: lowest at 03:00, highest at 15:00."""
    hours = second_of_day / 3600
    return 1 + DIURNAL_AMPLITUDE * math.sin(2 * math.pi * (hours - 9) / 24)


def load_scripts(data: Path | None) -> tuple[list[Script], str]:
    """The scripts, and where they came from: the evaluation data when `data` holds it, else
    the repository's sample conversations."""
    if data is not None and (data / "locomo-dev").is_dir() and (data / "cri-persona-1").is_dir():
        from memwrite_local.evaluation.data import DataFormat, read_dataset
        from memwrite_local.evaluation.evaluate import sessions_as

        scripts: list[Script] = []
        for data_format, folder in (
            (DataFormat.LOCOMO, "locomo-dev"),
            (DataFormat.CRI, "cri-persona-1"),
        ):
            for conversation in read_dataset(data_format, data / folder).conversations:
                for user in conversation.users:
                    sessions = sessions_as(conversation, user)
                    scripts.append([_script_session(session) for session in sessions])
        return scripts, str(data)
    scripts = [
        [_script_session(json.loads(path.read_text(encoding="utf-8")))]
        for path in sorted(SAMPLE_CONVERSATIONS.glob("*.json"))
    ]
    if not scripts:
        raise FileNotFoundError(f"no conversations in {data} nor in {SAMPLE_CONVERSATIONS}")
    return scripts, str(SAMPLE_CONVERSATIONS)


def _script_session(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(str(turn["role"]), str(turn["content"])) for turn in body["turns"]]


def _chunks(script: Script) -> list[tuple[int, tuple[tuple[str, str], ...]]]:
    """The script as requests: (session number, turns), in order."""
    return [
        (number, tuple(session[start : start + TURNS_PER_REQUEST]))
        for number, session in enumerate(script)
        for start in range(0, len(session), TURNS_PER_REQUEST)
        if session[start : start + TURNS_PER_REQUEST]
    ]


@dataclass
class _User:
    user_id: str
    chunks: list[tuple[int, tuple[tuple[str, str], ...]]]
    cursor: int

    def next_request(self, at: float, tenant: str) -> Request:
        cycle, position = divmod(self.cursor, len(self.chunks))
        self.cursor += 1
        session, turns = self.chunks[position]
        return Request(at, tenant, self.user_id, f"{self.user_id}-s{cycle}-{session}", turns)


def generate(plan: TrafficPlan, scripts: Sequence[Script]) -> list[Request]:
    """Every request of the run, in arrival order (seeded: the same plan, the same traffic)."""
    rng = random.Random(plan.seed)
    chunked = [_chunks(script) for script in scripts]
    chunked = [chunks for chunks in chunked if chunks]
    # Each user replays one script, picked evenly: a request carries, on average, the mean of
    # the scripts' mean visit sizes (not the mean over all visits, which the scripts with the
    # most visits would set).
    turns_per_request = statistics.fmean(_turns_per_visit(chunks) for chunks in chunked)
    turns_per_s = plan.turns_per_day / 86_400 / plan.tenants  # each tenant's share
    users_per_tenant = max(
        1, round(turns_per_s / turns_per_request * 86_400 / REQUESTS_PER_USER_PER_DAY)
    )
    users = {
        tenant: [
            _User(f"u{number:04d}", chunks, rng.randrange(len(chunks)))
            for number in range(users_per_tenant)
            for chunks in [chunked[rng.randrange(len(chunked))]]
        ]
        for tenant in (f"t{index:02d}" for index in range(plan.tenants))
    }
    # A tenant's requests go to its users evenly: its rate carries exactly its share of turns.
    requests_per_s = {
        tenant: turns_per_s / statistics.fmean(_turns_per_visit(user.chunks) for user in people)
        for tenant, people in users.items()
    }
    burst_start, burst_end = plan.burst
    requests: list[Request] = []
    for minute in range(math.ceil(plan.duration_s / 60)):
        start = minute * 60.0
        length = min(60.0, plan.duration_s - start)
        for index, (tenant, people) in enumerate(users.items()):
            factor = plan.burst_factor if index == 0 and burst_start <= start < burst_end else 1.0
            rate = requests_per_s[tenant] * diurnal((plan.start_hour * 3600 + start) % 86_400)
            mean = rate * length * factor
            for _ in range(_poisson(rng, mean)):
                user = people[rng.randrange(len(people))]
                visit = user.next_request(start + rng.random() * length, tenant)
                requests.extend(_split(visit, plan.turns_per_request))
    requests.sort(key=lambda request: request.at)
    return requests


def _split(visit: Request, size: int) -> list[Request]:
    """A visit as requests of `size` turns, each sent when its last turn is said (the
    visit's last at the visit's time, as one request of it would be)."""
    last = len(visit.turns) - 1
    return [
        replace(
            visit, at=visit.at - (last - end) * TURN_SPACING_S, turns=visit.turns[start : end + 1]
        )
        for start in range(0, len(visit.turns), size)
        for end in [min(start + size, len(visit.turns)) - 1]
    ]


def _turns_per_visit(chunks: Sequence[tuple[int, tuple[tuple[str, str], ...]]]) -> float:
    return sum(len(turns) for _, turns in chunks) / len(chunks)


def _poisson(rng: random.Random, mean: float) -> int:
    """A Poisson draw (Knuth's method; a normal approximation for large means)."""
    if mean > 50:
        return max(0, round(rng.gauss(mean, math.sqrt(mean))))
    limit, count, product = math.exp(-mean), 0, rng.random()
    while product > limit:
        count += 1
        product *= rng.random()
    return count
