"""Generate the relative-date sets (issue 26, "dates that mean dates"): chat notes that tell their
events relative to their own date, and questions that name the event's date explicitly.

    python bench/recall_sets/make_dates.py            # writes dates and dates-test
    python bench/recall_sets/make_dates.py dates      # one of them

The shape: a person's chat sessions, one a day, dated three ways (frontmatter ``date``; only a
dated title, ``# Chat 2026-03-15``; only a dated file name). A "kind" is one sort of event that
happens several times (dinner out, a film, a hike, a guest ...). Each event is told in the session
of a later day, relative to it: "Yesterday we had dinner at Osteria Blu", "Two days ago",
"Last Friday", or in German ("Gestern", "Vorgestern", "Vor drei Tagen", "Letzten Freitag").
The question names the event's day ("Which restaurant did we have dinner at on 14 March 2026?",
"on March 14th", "on 2026-03-14", "am 14. März 2026"), so the words of the question match every
event of its kind alike and only the date tells them apart.

Month questions: one purchase a month, told "last week", "earlier this month", "letzte Woche" or
"Anfang des Monats" in a session of that month (or the next one, for "last week"), and asked "in
March 2026".

Distractors: for each kind, notes whose title carries a month and year and the kind's word
("Restaurant ideas for March 2026"), the failure issue 26 names (titles weigh 8x); and filler
sessions on the other days, among them the very day asked about.

``dates`` (train: parameters may be chosen on it) and ``dates-test`` (held out) are the same recipe
from different seeds: other items, other days, other phrasings per event. Each has 24 day
questions and 4 month questions.
"""

from __future__ import annotations

import datetime as dt
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))

MONTHS_EN = ["January", "February", "March", "April", "May", "June", "July", "August", "September"]
WEEKDAYS_EN = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
WEEKDAYS_DE = ["Montag", "Dienstag", "Mittwoch", "Donnerstag", "Freitag", "Samstag", "Sonntag"]

# kind: the question (with {when}), the event line in English and in German (with {rel} and {i}),
# the items, the kind's word for the title distractors
KINDS = [
    dict(
        q="Which restaurant did we have dinner at {when}?",
        en="{rel} we had dinner at {i}, the dumplings were excellent.",
        de="{rel} waren wir zum Abendessen im {i}, die Teigtaschen waren hervorragend.",
        items=["Osteria Blu", "Koji's Ramen", "Cafe Sol", "Bistro Margaux", "the Lotus Garden", "Taverna Kriti"],
        word="Restaurant ideas",
    ),
    dict(
        q="Which film did I watch {when}?",
        en="{rel} I watched {i} at the cinema, a bit too long but beautiful.",
        de="{rel} habe ich im Kino {i} gesehen, etwas lang, aber schön.",
        items=["Past Lives", "Dune Part Two", "Perfect Days", "Aftersun", "The Zone of Interest", "Anatomy of a Fall"],
        word="Films to watch",
    ),
    dict(
        q="Where did I go hiking {when}?",
        en="{rel} I went hiking up {i}, my legs still hurt.",
        de="{rel} war ich wandern am {i}, meine Beine tun noch weh.",
        items=[
            "Mount Feldberg",
            "the Brocken",
            "Hoher Meissner",
            "the Wasserkuppe",
            "Grosser Arber",
            "the Kahler Asten",
        ],
        word="Hiking plans",
    ),
    dict(
        q="Who came to visit us {when}?",
        en="{rel} my {i} came over for the afternoon and stayed for dinner.",
        de="{rel} kam meine {i} zu Besuch und blieb zum Abendessen.",
        items=[
            "aunt Helga",
            "cousin Marta",
            "old friend Ilse",
            "neighbour Renata",
            "godmother Dagny",
            "colleague Lina",
        ],
        word="Guests and visits",
    ),
    dict(
        q="Which book did I finish {when}?",
        en="{rel} I finished reading {i}, the ending surprised me.",
        de="{rel} habe ich {i} zu Ende gelesen, das Ende hat mich überrascht.",
        items=["Middlemarch", "The Overstory", "Piranesi", "Stoner", "Klara and the Sun", "The Remains of the Day"],
        word="Reading list",
    ),
    dict(
        q="Which concert did I go to {when}?",
        en="{rel} I saw {i} live at the concert hall, what an evening.",
        de="{rel} habe ich {i} live im Konzertsaal gehört, was für ein Abend.",
        items=[
            "the Berlin Philharmonic",
            "Nils Frahm",
            "Max Richter",
            "the Kronos Quartet",
            "Hania Rani",
            "Olafur Arnalds",
        ],
        word="Concert tickets",
    ),
    dict(
        q="What did I cook for the dinner party {when}?",
        en="{rel} I cooked {i} for the dinner party, everyone wanted the recipe.",
        de="{rel} habe ich für die Gäste {i} gekocht, alle wollten das Rezept.",
        items=["a lamb tagine", "mushroom risotto", "a Thai green curry", "beef bourguignon", "paella", "lasagne"],
        word="Dinner party menu",
    ),
    dict(
        q="Which museum did I visit {when}?",
        en="{rel} I spent the morning at {i}, the new wing is worth it.",
        de="{rel} war ich den ganzen Vormittag im {i}, der neue Flügel lohnt sich.",
        items=["the Pergamon Museum", "the Städel", "the Kunsthalle", "the Folkwang", "the Lenbachhaus", "the Ludwig"],
        word="Museum passes",
    ),
]

# the month questions: one purchase a month, told by a span
BUY = dict(
    q="What did I buy {when}?",
    en={
        "last week": "Last week I finally bought {i}, it was on sale.",
        "earlier this month": "Earlier this month I finally bought {i}, it was on sale.",
    },
    de={
        "letzte Woche": "Letzte Woche habe ich endlich {i} gekauft, es war im Angebot.",
        "Anfang des Monats": "Anfang des Monats habe ich endlich {i} gekauft, es war im Angebot.",
    },
    items=["a road bike", "a standing desk", "an espresso machine", "a tent", "a sewing machine", "a telescope"],
    word="Shopping list",
)

FILLER = [
    "User: Can you help me plan meals for the week?",
    "Assistant: Sure, how many evenings will you cook at home?",
    "User: The train was late again, I missed the first meeting.",
    "Assistant: Would an earlier connection help on Tuesdays?",
    "User: I want to save more this year, any simple rule?",
    "Assistant: Moving a fixed amount on payday works for many people.",
    "User: My laptop fan is loud since the update.",
    "Assistant: Check which process uses the CPU, it is often an indexer.",
    "User: What should I pack for a weekend in the mountains?",
    "Assistant: Layers, a rain jacket and good socks.",
    "User: The heating bill doubled compared to last winter.",
    "Assistant: A smart thermostat schedule could cut it a little.",
    "User: Remind me to renew the passport before the trip.",
    "Assistant: Noted; renewals take about six weeks at the moment.",
    "User: We watched a documentary about octopuses, fascinating.",
    "Assistant: They can taste with their arms, which still surprises people.",
    "User: The washing machine smells musty.",
    "Assistant: Run an empty hot cycle with vinegar and leave the door open.",
    "User: Our team moved the stand-up to half past nine.",
    "Assistant: That leaves you a quiet hour to start the day.",
    "User: The weather app says storms all weekend.",
    "Assistant: A good weekend for that puzzle you bought, then.",
    "User: I keep forgetting to water the balcony plants.",
    "Assistant: A reminder right after breakfast usually sticks.",
]

# (phrase in English or German, days back); "last <weekday>" is computed from the telling day
REL_EN = [("Yesterday", 1), ("Two days ago", 2), ("Three days ago", 3), ("last", 0)]
REL_DE = [("Gestern", 1), ("Vorgestern", 2), ("Vor drei Tagen", 3), ("letzten", 0)]


def _when(day: dt.date, form: int) -> str:
    """The question's explicit date, in one of four forms."""
    if form == 0:
        return f"on {day.day} {MONTHS_EN[day.month - 1]} {day.year}"
    if form == 1:
        sfx = {1: "st", 2: "nd", 3: "rd", 21: "st", 22: "nd", 23: "rd", 31: "st"}.get(day.day, "th")
        return f"on {MONTHS_EN[day.month - 1]} {day.day}{sfx}"
    if form == 2:
        return f"on {day.isoformat()}"
    return f"on {MONTHS_EN[day.month - 1]} {day.day}, {day.year}"


def _session(rng: random.Random, day: dt.date, planted: list[str], style: int, title: str = "") -> tuple[str, str]:
    """(path, text) of one chat session; ``style`` 0: frontmatter date, 1: dated title only,
    2: dated file name only."""
    turns = rng.sample(FILLER, rng.randint(6, 10))
    for line in planted:
        turns.insert(rng.randint(1, len(turns)), "User: " + line)
    body = "\n\n".join(turns)
    iso = day.isoformat()
    if title:
        return f"notes/{iso}-{title.lower().replace(' ', '-')}.md", f"---\ndate: {iso}\n---\n# {title}\n\n{body}\n"
    if style == 0:
        return (
            f"chats/session-{day.strftime('%j')}.md",
            f"---\ndate: {iso}\ntype: conversation\n---\n# Chat session\n\n{body}\n",
        )
    if style == 1:
        return f"chats/chat-{day.strftime('%j')}.md", f"# Chat {iso}\n\n{body}\n"
    return f"chats/{iso}-session.md", f"# Chat session\n\n{body}\n"


def make(name: str, seed: int) -> None:
    rng = random.Random(seed)
    start = dt.date(2026, 1, 5)
    days = [start + dt.timedelta(days=k) for k in range(110)]  # to 2026-04-24
    used: dict[dt.date, tuple[str, str]] = {}
    questions: list[tuple[str, str, str]] = []
    one = dt.timedelta(days=1)
    # the day questions: 8 kinds x 3 events, each told on a later day
    events = []
    for k in KINDS:
        items = rng.sample(k["items"], 3)
        for i in items:
            events.append((k, i))
    rng.shuffle(events)
    free = list(days[10:])
    rng.shuffle(free)
    form = 0
    for n, (k, item) in enumerate(events):
        german = n % 4 == 3
        rels = REL_DE if german else REL_EN
        while True:
            tell = free.pop()
            phrase, back = rels[rng.randrange(len(rels))]
            if back == 0:  # last <weekday>: a weekday 1-6 days before the telling day
                back = rng.randint(1, 6)
                wd = (tell - back * one).weekday()
                phrase = f"{'Letzten' if german else 'Last'} {(WEEKDAYS_DE if german else WEEKDAYS_EN)[wd]}"
            event = tell - back * one
            if tell not in used and event >= start:
                break
        line = (k["de"] if german else k["en"]).format(rel=phrase, i=item)
        used[tell] = _session(rng, tell, [line], rng.randrange(3))
        when = _when(event, form % 4)
        form += 1
        q = k["q"].format(when=when)
        questions.append(("day", used[tell][0], q))
    # the month questions: one purchase in each of January..April
    items = rng.sample(BUY["items"], 4)
    spans = ["last week", "earlier this month", "letzte Woche", "Anfang des Monats"]
    rng.shuffle(spans)
    for month, (item, span) in enumerate(zip(items, spans, strict=True), start=1):
        for _try in range(200):
            tell = rng.choice(days)
            if tell in used:
                continue
            if span in ("last week", "letzte Woche"):
                monday = tell - tell.weekday() * one
                first, last = monday - 7 * one, monday - one
                if first.month == last.month == month and first >= start:
                    break
            elif tell.month == month and tell.day >= 8:
                break
        else:
            raise SystemExit(f"no day for the {span} purchase in month {month}")
        text = (BUY["en"].get(span) or BUY["de"][span]).format(i=item)
        used[tell] = _session(rng, tell, [text], rng.randrange(3))
        questions.append(("month", used[tell][0], BUY["q"].format(when=f"in {MONTHS_EN[month - 1]} 2026")))
    # title distractors: a month and year in the title with the kind's word, on a day of their own
    for k in [*KINDS, BUY]:
        for month in rng.sample(range(1, 5), 2):
            for _try in range(200):
                d = rng.choice(days)
                if d not in used:
                    break
            title = f"{k['word']} for {MONTHS_EN[month - 1]} 2026"
            word = k["word"].split()[0].lower()
            used[d] = _session(rng, d, [f"Started a note about {word} for {MONTHS_EN[month - 1]}."], 0, title)
    # filler sessions on some of the other days (the asked days among them)
    rest = [d for d in days if d not in used]
    for d in rng.sample(rest, min(len(rest), 30)):
        used[d] = _session(rng, d, [], rng.randrange(3))
    notes = dict(used.values())
    assert len(notes) == len(used), "two sessions share a path"
    folder = os.path.join(HERE, name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "notes.txt"), "w", encoding="utf-8") as fh:
        for path in sorted(notes):
            fh.write(f"=== {path}\n{notes[path]}")
    with open(os.path.join(folder, "questions.tsv"), "w", encoding="utf-8") as fh:
        fh.write("# kind\tevidence notes (|)\tquestion\n")
        for kind, path, q in questions:
            fh.write(f"{kind}\t{path}\t{q}\n")


SETS = {"dates": 6, "dates-test": 606}


if __name__ == "__main__":
    import sys

    for name in sys.argv[1:] or list(SETS):
        make(name, SETS[name])
        print(name, "written")
