"""The built-in topics' vocabularies: the words and phrases that mark a turn as of a topic when
no model reads it (`memwrite.topics.matcher`, docs/design.md §2).

Terms are written in their base form ("break my arm", "diagnose"): `memwrite.topics.matcher` matches
their inflections too ("broke my arm", "diagnosed", "migraines"). A term is specific to its
topic; a word that is also everyday speech ("sick", "pain", "hospital", "therapy") is written
in the phrases that make it the topic's ("feel sick", "in the hospital", "see a therapist"),
and `exceptions` name the figurative or neighbouring phrases that a term inside them does not
mark ("sick of", "broke my heart", "like therapy", "health insurance"). The topics are the
ones the rule fast-path assigns (`memwrite.extract.rules`), plus the labels a tenant most
often excludes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["BUILTIN_TOPICS", "TopicTerms"]


@dataclass(frozen=True)
class TopicTerms:
    terms: tuple[str, ...]
    exceptions: tuple[str, ...] = ()


# Body parts an injury, pain or operation is said of ("sprained my ankle", "knee surgery").
_BODY: Final = (
    "arm", "leg", "wrist", "ankle", "knee", "hip", "shoulder", "back", "lower back", "neck",
    "foot", "hand", "finger", "toe", "elbow", "rib", "collarbone", "hamstring", "acl",
    "meniscus", "achilles", "spine", "jaw", "tooth", "teeth", "nose", "skull", "pelvis",
    "thumb", "calf", "groin", "rotator cuff", "tendon", "ligament", "disc", "vertebra",
)  # fmt: skip
_INJURY_VERBS: Final = (
    "break", "fracture", "sprain", "injure", "hurt", "tear", "pull", "dislocate", "twist",
    "strain", "bruise", "crack",
)  # fmt: skip
_BODY_NOUNS: Final = ("pain", "ache", "injury", "surgery", "operation", "fracture", "sprain")


def _injuries() -> tuple[str, ...]:
    """'sprain my ankle', 'sprained ankle', 'ankle surgery', 'my knee hurt'."""
    found: list[str] = []
    for part in _BODY:
        found += [f"{verb} my {part}" for verb in _INJURY_VERBS]
        found += [f"{verb} {part}" for verb in _INJURY_VERBS if verb not in ("hurt", "pull")]
        found += [f"{part} {noun}" for noun in _BODY_NOUNS]
        found += [f"my {part} hurt", f"my {part} be kill me", f"my {part} ache"]
    return tuple(found)


_CONDITIONS: Final = (
    "diabetes", "diabetic", "prediabetes", "blood sugar",
    "a1c", "asthma", "asthmatic", "cancer", "tumor", "tumour", "leukemia", "lymphoma",
    "melanoma", "chemo", "chemotherapy", "radiation therapy", "epilepsy",
    "epileptic", "seizure", "migraine", "hypertension", "blood pressure", "cholesterol",
    "heart attack", "heart condition", "heart disease", "heart failure",
    "arrhythmia", "stroke", "had a stroke", "blood clot", "arthritis", "osteoporosis", "lupus",
    "multiple sclerosis", "parkinson", "alzheimer", "dementia", "crohn", "colitis",
    "celiac", "coeliac", "ibs", "irritable bowel", "ulcer", "gout", "eczema", "psoriasis",
    "rosacea", "thyroid", "hypothyroidism", "hyperthyroidism", "kidney function",
    "kidney disease", "kidney stone", "liver disease", "hepatitis", "hiv", "anemia",
    "anaemia", "vertigo", "tinnitus", "sleep apnea", "sleep apnoea", "cpap",
    "insomnia", "narcolepsy", "chronic pain", "chronic fatigue", "fibromyalgia",
    "endometriosis", "pcos", "slipped disc", "scoliosis", "concussion",
    "whiplash", "allergy", "allergic", "anaphylaxis", "hay fever", "intolerant",
    "intolerance", "depression", "clinically depressed", "be depressed", "feel depressed",
    "anxiety disorder", "my anxiety", "social anxiety", "struggle with anxiety",
    "suffer from anxiety", "anxiety since", "panic attack", "anxiety attack", "bipolar",
    "schizophrenia", "ptsd", "ocd", "adhd", "autism", "autistic", "dyslexia", "eating disorder",
    "anorexia", "bulimia", "self-harm", "suicidal", "mental illness", "mentally ill",
    "my mental health", "struggle with mental health", "mental health issue",
    "mental health problem", "mental health condition", "burnout", "addiction", "addict",
    "alcoholism", "recovering alcoholic", "be sober", "sober for", "sobriety", "relapse",
    "covid", "long covid", "the flu", "flu shot", "pneumonia", "bronchitis", "infection",
    "strep", "sore throat", "fever", "catch a cold", "have a cold", "get a cold",
    "headache", "stomach ache", "stomachache", "nausea", "nauseous", "dizzy", "dizziness",
    "chest pain", "in pain", "terminally ill", "chronically ill", "fall ill", "be ill",
    "illness", "symptom", "get sick", "feel sick",
    "be sick", "sick leave", "sick day", "off sick", "call in sick", "disability",
    "wheelchair", "hearing aid", "pregnant", "pregnancy",
    "miscarriage", "ivf", "fertility", "infertility", "menopause", "rash",
    "swollen", "crutch", "in a cast", "stitches", "wound", "surgery",
    "operate on", "post-op", "recover from surgery", "scar tissue",
)  # fmt: skip
_MEDICATION: Final = (
    "medication", "meds", "my medicine", "take medicine", "pill", "prescription",
    "prescribe", "dosage", "mg", "milligram", "insulin", "inhaler",
    "antibiotic", "antidepressant", "ssri", "sertraline", "zoloft", "prozac", "fluoxetine",
    "lexapro", "escitalopram", "xanax", "adderall", "ritalin", "metformin", "statin",
    "lipitor", "ibuprofen", "advil", "tylenol", "paracetamol", "acetaminophen", "aspirin",
    "painkiller", "pain killer", "pain medication", "opioid", "steroid", "epipen",
    "antihistamine", "blood thinner", "warfarin", "levothyroxine", "birth control",
    "vaccine", "vaccinated", "booster shot", "side effect",
    "on the pill",
)  # fmt: skip
_THERAPY: Final = (
    "therapist", "therapy session", "in therapy", "go to therapy", "start therapy",
    "individual therapy", "couples therapy", "family therapy", "group therapy",
    "cognitive behavioral therapy", "cbt", "physical therapy", "physiotherapy", "physio",
    "speech therapy", "occupational therapy", "therapy on", "therapy for", "therapy with",
    "therapy is", "from therapy", "post-therapy", "need therapy",
    "counselor", "counsellor", "marriage counselor", "see a counselor", "counseling for",
    "psychiatrist", "psychologist", "rehab", "rehabilitation", "support group",
)  # fmt: skip
_APPOINTMENTS: Final = (
    "doctor appointment", "doctor's appointment", "dentist appointment",
    "medical appointment", "hospital appointment", "my doctor", "the doctor say",
    "see a doctor", "see the doctor", "go to the doctor", "doctor put me", "my gp", "the gp",
    "my dentist", "the dentist",
    "orthodontist", "dermatologist", "cardiologist", "oncologist", "neurologist",
    "gynecologist", "gynaecologist", "urologist", "endocrinologist", "rheumatologist",
    "allergist", "pediatrician", "paediatrician", "specialist about", "a specialist for",
    "my surgeon", "checkup", "check-up", "annual physical", "physical exam", "blood test",
    "bloodwork", "blood work", "lab result", "scan result",
    "mri", "x-ray", "ct scan", "ultrasound", "biopsy", "mammogram", "colonoscopy",
    "the er", "emergency room", "urgent care", "hospitalize", "hospitalise",
    "in the hospital", "in hospital", "to the hospital", "from the hospital",
    "out of the hospital", "hospital stay", "admit to the hospital", "admit to hospital",
    "discharge from", "intensive care", "the icu", "diagnose", "diagnosis", "prognosis",
    "medical condition", "medical history", "medical leave", "medical test",
)  # fmt: skip

_HEALTH_EXCEPTIONS: Final = (
    "sick of", "sick and tired", "break my heart", "like therapy", "like a therapy",
    "form of therapy", "kind of therapy", "retail therapy", "health insurance",
    "in mental health", "mental health job", "mental health be", "stroke of", "brush stroke",
    "pain in the neck",
)  # fmt: skip
# A profession is work, not health: "I'm a physical therapist", "she works as a dentist".
_CARERS: Final = (
    "therapist", "physical therapist", "physiotherapist", "psychologist", "psychiatrist",
    "counselor", "counsellor", "dentist", "surgeon", "dermatologist", "cardiologist",
    "oncologist", "neurologist", "orthodontist", "pediatrician", "specialist",
)  # fmt: skip
# A pet's health is the pet's: "my cat had surgery".
_PETS: Final = ("dog", "cat", "puppy", "kitten", "pet", "horse", "rabbit")


def _health_exceptions() -> tuple[str, ...]:
    found = list(_HEALTH_EXCEPTIONS)
    for carer in _CARERS:
        found += [f"be a {carer}", f"be an {carer}", f"work as a {carer}", f"work as an {carer}"]
    for pet in _PETS:
        found += [f"{pet} surgery", f"{pet} be sick"]
    return tuple(found)


# The rules' own topics, and those most often excluded for legal reasons.
BUILTIN_TOPICS: Final[dict[str, TopicTerms]] = {
    "health": TopicTerms(
        _CONDITIONS + _MEDICATION + _THERAPY + _APPOINTMENTS + _injuries(), _health_exceptions()
    ),
    "religion": TopicTerms(
        (
            "church",
            "mosque",
            "synagogue",
            "temple",
            "pray",
            "prayer",
            "bible",
            "quran",
            "torah",
            "christian",
            "catholic",
            "protestant",
            "muslim",
            "jewish",
            "hindu",
            "buddhist",
            "sikh",
            "atheist",
            "agnostic",
            "my faith",
            "religion",
            "religious",
            "ramadan",
            "passover",
            "bar mitzvah",
            "bat mitzvah",
            "baptize",
            "pastor",
            "priest",
            "rabbi",
            "imam",
        ),
        ("temple run",),
    ),
    "politics": TopicTerms(
        (
            "vote for",
            "voted for",
            "democrat",
            "republican",
            "liberal party",
            "conservative party",
            "labour party",
            "green party",
            "political party",
            "my politics",
            "political view",
            "left-wing",
            "right-wing",
            "socialist",
            "libertarian",
            "campaign for",
            "elect",
            "ballot",
            "trade union",
            "union member",
        ),
    ),
    "sexuality": TopicTerms(
        (
            "gay",
            "lesbian",
            "bisexual",
            "pansexual",
            "asexual",
            "queer",
            "sexual orientation",
            "come out as",
            "come out to my",
            "transgender",
            "trans woman",
            "trans man",
            "non-binary",
            "nonbinary",
            "my gender identity",
        ),
    ),
    "finance": TopicTerms(
        (
            "salary",
            "my income",
            "mortgage",
            "debt",
            "loan",
            "credit score",
            "bankrupt",
            "bankruptcy",
            "my savings",
            "net worth",
            "paycheck",
            "pay rise",
            "raise of",
            "tax return",
            "401k",
            "pension",
            "overdraft",
            "my bank account",
            "invest in",
        ),
    ),
    "family": TopicTerms(
        (
            "my wife",
            "my husband",
            "my partner",
            "my son",
            "my daughter",
            "my kid",
            "my child",
            "my mom",
            "my mum",
            "my mother",
            "my dad",
            "my father",
            "my sister",
            "my brother",
            "my parent",
            "my grandma",
            "my grandmother",
            "my grandpa",
            "my grandfather",
            "my aunt",
            "my uncle",
            "my cousin",
            "my niece",
            "my nephew",
            "my family",
            "my fiance",
            "my fiancee",
            "divorce",
            "married",
            "engaged",
        ),
    ),
    "location": TopicTerms(
        ("i live in", "i live on", "move to", "my address", "my hometown", "grow up in"),
    ),
    "work": TopicTerms(
        (
            "my job",
            "my boss",
            "my manager",
            "my coworker",
            "my colleague",
            "my employer",
            "work at",
            "work for",
            "work as",
            "get hire",
            "get fire",
            "laid off",
            "promote",
            "promotion",
            "my salary",
            "my team",
            "my company",
        ),
    ),
    "education": TopicTerms(
        (
            "university",
            "college",
            "school",
            "my degree",
            "my major",
            "graduate",
            "study at",
            "study for",
            "my exam",
            "my thesis",
            "phd",
            "master's",
            "bachelor's",
        ),
    ),
    "pets": TopicTerms(
        ("my dog", "my cat", "my puppy", "my kitten", "my pet", "the vet", "my hamster"),
    ),
    "food": TopicTerms(
        (
            "vegan",
            "vegetarian",
            "pescatarian",
            "keto",
            "gluten-free",
            "my diet",
            "favorite food",
            "favourite food",
            "i eat",
            "i don't eat",
            "i cook",
        ),
    ),
}
