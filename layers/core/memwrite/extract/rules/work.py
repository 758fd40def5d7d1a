"""Work rules: employer, job, employment status, and the job the user quit."""

from __future__ import annotations

import re
from typing import Final

from memwrite.claims.candidate import MemoryType
from memwrite.extract.rules.engine import (
    Claim,
    Context,
    Found,
    Rule,
    Spec,
    Subject,
    collapse,
    make_claim,
    needs_subject,
    one_claim,
    proper_ok,
    strip_value,
)
from memwrite.extract.rules.vocabulary import (
    ADV,
    BAD_PLACE_FIRST,
    BAD_THINGS,
    BE,
    BE_SIMPLE,
    END,
    HAVE_BEEN,
    PLACE_STOPS,
    SUBJECT,
    token_run,
    verbose,
)

_OCCUPATIONS = (
    r"nurse|doctor|physician|surgeon|dentist|pharmacist|paramedic|midwife|veterinarian|vet"
    r"|therapist|psychologist|psychiatrist|counsel(?:l)?or|teacher|professor|lecturer|tutor"
    r"|principal|librarian|student|researcher|scientist|engineer|developer|programmer|coder"
    r"|architect|designer|analyst|consultant|accountant|auditor|lawyer|attorney|paralegal"
    r"|judge|banker|broker|trader|realtor|agent|manager|director|executive|ceo|cto|cfo|coo"
    r"|founder|entrepreneur|freelancer|contractor|intern|chef|cook|baker|barista|bartender"
    r"|waiter|waitress|server|cashier|driver|pilot|mechanic|electrician|plumber|carpenter"
    r"|builder|welder|technician|firefighter|officer|detective|soldier|sailor|farmer"
    r"|writer|author|journalist|reporter|editor|photographer|artist|painter|illustrator"
    r"|animator|musician|singer|actor|actress|producer|filmmaker|translator|interpreter"
    r"|economist|statistician|mathematician|physicist|chemist|biologist|geologist"
    r"|astronomer|recruiter|salesperson|marketer|copywriter|administrator|clerk|secretary"
    r"|receptionist|assistant|caregiver|nanny|janitor|housekeeper|coach|trainer|instructor"
    r"|practitioner|specialist|technologist|surveyor|dietitian|nutritionist|optometrist"
    r"|radiologist|anesthesiologist|dermatologist|pediatrician|sysadmin|devops|streamer"
    r"|youtuber|influencer|blogger|podcaster|miner|fisherman|planner|strategist|investor"
)
# "I'm a terrible cook" is a skill, "an aspiring writer" a wish: neither is a job.
_EVALUATIVE = (
    r"terrible|bad|good|great|decent|horrible|awful|amazing|excellent|poor|lousy|better|worse"
    r"|best|worst|huge|big|total|complete|natural|born|wannabe|aspiring|frustrated|failed"
    r"|closet|amateur|hobby|weekend|armchair|backseat|would-be|budding"
)

_WORKS_AT_SPEC: Final = Spec(
    "works_at",
    MemoryType.FACT,
    "work",
    True,
    0.8,
    ("Where does {s} work?", "Who is {s}'s employer?", "Which company does {s} work for?"),
)
_STUDIES_AT_SPEC: Final = Spec(
    "studies_at",
    MemoryType.FACT,
    "education",
    True,
    0.7,
    ("Where does {s} study?", "Which school does {s} attend?", "Is {s} a student?"),
)
_OCCUPATION_SPEC: Final = Spec(
    "occupation",
    MemoryType.FACT,
    "work",
    True,
    0.8,
    ("What does {s} do for a living?", "What is {s}'s job?", "What is {s}'s occupation?"),
)
_EMPLOYMENT_STATUS_SPEC: Final = Spec(
    "employment_status",
    MemoryType.FACT,
    "work",
    True,
    0.7,
    ("Is {s} employed?", "What is {s}'s employment status?", "Does {s} work?"),
)


def _occupation_claim(subject: Subject, role: str, ctx: Context) -> Claim:
    """'former nurse' is a retraction of 'nurse'; articles follow the role's first letter."""
    negated = ctx.negated
    lowered = role.lower()
    for prefix in ("former ", "ex-", "ex "):
        if lowered.startswith(prefix):
            role, negated = role[len(prefix) :].strip(), True
            break
    article = "an" if role[:1].lower() in "aeiou" else "a"
    return make_claim(
        subject, _OCCUPATION_SPEC, role, f"works as {article} {role}", ctx, negated=negated
    )


def _employer_claim(subject: Subject, org: str, role: str, ctx: Context) -> Claim:
    if role.lower().startswith("student"):
        return make_claim(subject, _STUDIES_AT_SPEC, org, f"studies at {org}", ctx)
    return make_claim(subject, _WORKS_AT_SPEC, org, f"works at {org}", ctx)


def _named_employer(value: str, m: re.Match[str], ctx: Context) -> bool:
    """An employer looks like a name and is not "my job" or "home"."""
    return proper_ok(value, ctx) and value.split(maxsplit=1)[0].lower() not in BAD_PLACE_FIRST


# "I quit Google", "I left my job at Acme": no longer works there.
_QUIT_JOB_RE = verbose(
    rf"""{SUBJECT}{ADV}\s+
    (?:(?i:quit|left)\s+(?i:my|his|her|their)\s+(?i:job)\s+(?i:at|with)
      |(?i:stopped)\s+(?i:working)\s+(?i:at|for)|(?i:quit))\s+
    {token_run("value", PLACE_STOPS, 6)}"""
)
QUIT_JOB: Final = Rule(
    _QUIT_JOB_RE,
    one_claim(_WORKS_AT_SPEC, "works at {value}", accept=_named_employer, negated=True),
)

# "I work at SAP", "I've been working for Acme as a designer".
_WORKS_AT_RE = verbose(
    rf"""{SUBJECT}
    (?:{HAVE_BEEN}{ADV}\s+(?i:working|employed)
      |{BE_SIMPLE}{ADV}\s+(?i:working|employed|interning)
      |{ADV}\s+(?i:work|works|intern|interns))
    \s+(?i:at|for)\s+{token_run("value", PLACE_STOPS, 6)}
    (?:\s+(?i:as)\s+(?:(?i:an?)\s+)?{token_run("occ", PLACE_STOPS, 5)})?"""
)


@needs_subject
def _build_works_at(
    m: re.Match[str], ctx: Context, subject: Subject, extra: list[Claim]
) -> Found | None:
    value = strip_value(m.group("value"))
    if not _named_employer(value, m, ctx):
        return None
    claims = [*extra, _employer_claim(subject, value, "", ctx)]
    occ = m.group("occ")
    if occ:
        claims.append(_occupation_claim(subject, strip_value(occ), ctx))
    return Found(tuple(claims), m.end())


WORKS_AT: Final = Rule(_WORKS_AT_RE, _build_works_at)

# What may follow a role: the end, punctuation, or a word that ends a place or role.
_ROLE_END_RE = re.compile(rf"\s*(?:$|[,;:!?.…)\]\-–—]|(?i:{PLACE_STOPS})(?![\w-]))")

# "I work as a nurse", "I work as a designer at Figma".
_WORKS_AS_RE = verbose(
    rf"""{SUBJECT}
    (?:{HAVE_BEEN}{ADV}\s+(?i:working)|{BE_SIMPLE}{ADV}\s+(?i:working)
      |{ADV}\s+(?i:work|works))
    \s+(?i:as)\s+(?:(?i:an?|the)\s+)?{token_run("value", PLACE_STOPS, 5)}
    (?:\s+(?i:at|for)\s+{token_run("org", PLACE_STOPS, 6)})?"""
)


@needs_subject
def _build_works_as(
    m: re.Match[str], ctx: Context, subject: Subject, extra: list[Claim]
) -> Found | None:
    role = strip_value(m.group("value"))
    if not role or role.split()[0].lower() in BAD_THINGS:
        return None
    if _ROLE_END_RE.match(m.string, m.end("value")) is None:
        return None  # the word limit cut the role ("a manager of the night shift [crew]")
    claims = [*extra, _occupation_claim(subject, role, ctx)]
    org = m.group("org")
    if org and proper_ok(strip_value(org), ctx):
        claims.append(_employer_claim(subject, strip_value(org), role, ctx))
    return Found(tuple(claims), m.end())


WORKS_AS: Final = Rule(_WORKS_AS_RE, _build_works_as)

# "I'm retired", "I'm between jobs".
_EMPLOYMENT_RE = verbose(
    rf"""{SUBJECT}{BE}{ADV}\s+
    (?P<value>(?i:retired|unemployed|self-employed|between\s+jobs
       |a\s+stay-at-home\s+(?:mom|dad|parent))){END}"""
)
EMPLOYMENT: Final = Rule(
    _EMPLOYMENT_RE,
    one_claim(_EMPLOYMENT_STATUS_SPEC, "is {value}", clean=collapse),
)

# "I'm a nurse", "I'm a senior software engineer at Stripe" (not "a terrible cook").
_OCCUPATION_RE = verbose(
    rf"""{SUBJECT}{BE}{ADV}\s+(?i:an?)\s+
    (?P<value>(?:(?!(?i:of|at|for|in|with|and|the|to|from|fan|{_EVALUATIVE})\b)[\w'’-]+\s+){{0,3}}
       (?i:{_OCCUPATIONS})s?)(?![\w'’-])
    (?:\s+(?i:at|for)\s+{token_run("org", PLACE_STOPS, 6)})?"""
)


@needs_subject
def _build_occupation(
    m: re.Match[str], ctx: Context, subject: Subject, extra: list[Claim]
) -> Found | None:
    role = collapse(m.group("value"))
    claims = [*extra, _occupation_claim(subject, role, ctx)]
    org = m.group("org")
    end = m.end()
    if org:
        org = strip_value(org)
        if _named_employer(org, m, ctx):
            claims.append(_employer_claim(subject, org, role, ctx))
        else:
            # "an architect at this firm": the firm is real but unnamed; leave it uncovered.
            end = m.start("org")
    return Found(tuple(claims), end)


OCCUPATION: Final = Rule(_OCCUPATION_RE, _build_occupation)
