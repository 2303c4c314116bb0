"""Generate the spread-answer sets (issue 26): list and count questions whose answer is spread over
two or three notes, each note mentioning one item in passing and in other words.

    python bench/recall_sets/make_spread.py            # writes spread and spread-test
    python bench/recall_sets/make_spread.py spread     # one of them

The shape, from the misses on a long-memory benchmark: a person's chat sessions (dated notes of
``User:``/``Assistant:`` turns about ordinary things). A "thread" is one person in the user's
life (a relation, "my sister", and a name, "Marta") and one kind of thing they are tied to
(restaurants recommended, tools borrowed). The first evidence note names the relation, the name
and the kind ("My sister Marta insisted we try Osteria Blu, her favourite restaurant"); the second
and third mention only the name and the item, in other words ("Had the ramen at Koji's on Marta's
advice"). The question asks by the relation and the kind ("How many restaurants has my sister
recommended?"), so it shares words with the first note only: the others are found through what
they share with it (the name), which is what a second stage is for.

Distractors that share words: for each thread, two notes naming the person about something else
("Marta is moving to Leeds"), and two using the kind's word without the person ("The restaurant
near work closed"); plus filler sessions. Every question lists all of its thread's evidence
notes (two or three), so R_all@5 needs each of them in the top five.

``spread`` (train: parameters may be chosen on it) and ``spread-test`` (held out) are the same
recipe from different seeds (as ``longmem`` and ``longmem-test``): other names, other items,
other dates and distractors, and other kinds get three notes. 90 notes, 24 questions each (12 need
two notes, 12 three).
"""

from __future__ import annotations

import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))

NAMES = [
    "Marta", "Ilse", "Tomasz", "Renata", "Okafor", "Beatriz", "Anders", "Lina", "Sato", "Kofi",
    "Dagny", "Emeka", "Paulina", "Viggo", "Zainab", "Henrik", "Ottilie", "Rasmus", "Soraya", "Bastian",
    "Wiebke", "Ignacio", "Mireille", "Thandiwe",
]  # fmt: skip

# kind: relation, the kind's words for the questions, the first line (relation, name, kind), the
# passing lines (name and item only), the items, two lines naming the person about something else,
# two lines using the kind's word without the person
KINDS = [
    dict(
        rel="my sister",
        q=["How many restaurants has my sister recommended to me?", "Which restaurants did my sister suggest?"],
        first="My sister {n} insisted we try {i}, her favourite restaurant in town.",
        later=[
            "Had dinner at {i} on {n}'s advice, and she was right about the dumplings.",
            "{n}'s tip for tonight was {i}; we got the last table by the window.",
        ],
        items=[
            "Osteria Blu",
            "Koji's Ramen",
            "the Elm Street taqueria",
            "Cafe Sol",
            "Bistro Margaux",
            "the Lotus Garden",
        ],
        other=[
            "{n} is moving to Leeds in spring, so we are helping her pack.",
            "{n} called about her new job at the library.",
        ],
        word=[
            "The restaurant near the office closed for renovation.",
            "I keep forgetting to book a restaurant for the anniversary.",
        ],
    ),
    dict(
        rel="my neighbour",
        q=["How many of my tools has my neighbour borrowed?", "Which tools did my neighbour borrow from me?"],
        first="My neighbour {n} came over to borrow my {i}, he says his tools are all in storage.",
        later=[
            "{n} still has my {i}, I need it back before the weekend.",
            "Lent {n} the {i} again this morning, he is fixing the fence.",
        ],
        items=["cordless drill", "ladder", "hedge trimmer", "pressure washer", "socket wrench set", "circular saw"],
        other=[
            "{n} waved from the balcony, his daughter's birthday party is on Saturday.",
            "{n}'s car alarm went off at three in the morning.",
        ],
        word=["I should sort the tools in the shed before winter.", "The hardware store has a sale on garden tools."],
    ),
    dict(
        rel="my manager",
        q=["How many books has my manager lent me?", "Which books did my manager give me to read?"],
        first="My manager {n} lent me {i}, she says every team lead should read it.",
        later=[
            "Finished {i} last night, {n} wants to discuss chapter four.",
            "Started {i} on the train; {n}'s bookmark is still in it.",
        ],
        items=[
            "The Phoenix Project",
            "Thinking in Systems",
            "High Output Management",
            "The Manager's Path",
            "Drive",
            "Radical Candor",
        ],
        other=["{n} moved our one-on-one to Thursday.", "{n} is on holiday in Crete until the twelfth."],
        word=[
            "The library fine for the overdue books was four euros.",
            "I donated two boxes of old books to the school.",
        ],
    ),
    dict(
        rel="my physiotherapist",
        q=[
            "How many exercises has my physiotherapist added to my routine?",
            "Which exercises did my physiotherapist give me?",
        ],
        first="My physiotherapist {n} added {i} to my routine for the knee.",
        later=[
            "Did the {i} three times today like {n} showed me.",
            "{n} wants ten more {i} each evening, it burns but it helps.",
        ],
        items=["wall sits", "calf raises", "glute bridges", "side planks", "step-ups", "clamshells"],
        other=["{n} is closing the practice for two weeks in August.", "{n} recommended a podcast about sleep."],
        word=[
            "Skipped my exercises again because of the late meeting.",
            "The gym changed its opening hours for exercise classes.",
        ],
    ),
    dict(
        rel="my cousin",
        q=["How many cities has my cousin sent me postcards from?", "From which cities did my cousin send postcards?"],
        first="A postcard from my cousin {n} arrived today, all the way from {i}.",
        later=[
            "{n} wrote from {i}, the picture shows the old harbour.",
            "On the fridge now: {n}'s card from {i}, with a stamp I have never seen.",
        ],
        items=["Valparaiso", "Tbilisi", "Hanoi", "Porto", "Marrakesh", "Tallinn"],
        other=["{n} finally passed the driving test.", "{n}'s wedding date is set for next June."],
        word=[
            "I sent postcards to the whole team from the conference.",
            "The postcard rack at the station is always empty.",
        ],
    ),
    dict(
        rel="my colleague",
        q=[
            "At how many conferences have I given talks with my colleague?",
            "Which conferences did I speak at together with my colleague?",
        ],
        first="My colleague {n} and I presented our tracing work at {i}.",
        later=[
            "{n} and I got the afternoon slot at {i}, the room was full.",
            "Our joint talk at {i} went well; {n} handled the questions.",
        ],
        items=["KubeCon", "PyCon Italia", "FOSDEM", "Devoxx", "StrangeLoop", "NDC Oslo"],
        other=["{n} brought cake for the team on Friday.", "{n} is switching to the payments squad."],
        word=["The conference badge got lost in the hotel.", "Conference travel budgets are frozen until March."],
    ),
    dict(
        rel="my daughter",
        q=["How many kinds of lessons has my daughter started?", "Which lessons did my daughter sign up for?"],
        first="My daughter {n} started {i} lessons this week and loves them.",
        later=["Drove {n} to {i} again, she practised the whole way home.", "{n} wants new gear for {i} already."],
        items=["violin", "swimming", "judo", "chess", "pottery", "ballet"],
        other=["{n} lost her first tooth at breakfast.", "{n}'s school trip to the zoo was cancelled."],
        word=[
            "The lessons at the community centre are cheaper this year.",
            "I took cooking lessons once and burnt the rice.",
        ],
    ),
    dict(
        rel="my friend",
        q=["How many board games has my friend brought to game night?", "Which board games did my friend bring?"],
        first="My friend {n} brought {i} to game night, a board game I had never played.",
        later=[
            "{n} showed up with {i} and won twice in a row.",
            "We played {i} until midnight; {n} had read all the rules in advance.",
        ],
        items=["Wingspan", "Azul", "Terraforming Mars", "Codenames", "Carcassonne", "Ticket to Ride"],
        other=["{n} is training for the city half marathon.", "{n} asked to borrow the camping stove."],
        word=["The board games shelf in the living room is overflowing.", "Game night moved to Wednesdays this month."],
    ),
    dict(
        rel="my landlord",
        q=["How many repairs has my landlord arranged?", "What did my landlord get fixed in the flat?"],
        first="My landlord {n} finally arranged a repair for the {i}.",
        later=[
            "A plumber sent by {n} came about the {i} this morning.",
            "{n}'s handyman replaced the {i}, it took him all afternoon.",
        ],
        items=[
            "boiler",
            "leaking kitchen tap",
            "broken window latch",
            "bathroom fan",
            "front door lock",
            "radiator valve",
        ],
        other=["{n} is raising the rent by three percent in January.", "{n} asked whether we plan to renew the lease."],
        word=[
            "The repair shop said the laptop screen costs too much.",
            "Bike repairs are cheaper at the market stall.",
        ],
    ),
    dict(
        rel="my uncle",
        q=["How many plants has my uncle given me?", "Which plants did my uncle give me?"],
        first="My uncle {n} gave me a {i} cutting from his greenhouse, plants are his thing.",
        later=["The {i} from {n} has a new leaf already.", "Repotted {n}'s {i}, the roots were everywhere."],
        items=["monstera", "fiddle leaf fig", "snake plant", "pothos", "rosemary bush", "lemon tree"],
        other=[
            "{n} is retiring from the post office after thirty years.",
            "{n} came to the barbecue with his new dog.",
        ],
        word=["The plants on the office windowsill need water.", "I bought soil for the balcony plants."],
    ),
    dict(
        rel="my teammate",
        q=["How many bugs has my teammate fixed for me?", "Which bugs did my teammate fix?"],
        first="My teammate {n} fixed the {i} bug that had blocked me for days.",
        later=[
            "{n} pushed a patch for the {i} before lunch, the tests are green.",
            "The {i} is gone thanks to {n}, she found it in ten minutes.",
        ],
        items=[
            "login redirect loop",
            "CSV export encoding",
            "timezone offset",
            "memory leak in the uploader",
            "flaky cache test",
            "double email",
        ],
        other=["{n} is presenting at the all-hands on Monday.", "{n} adopted a cat named Pixel."],
        word=["The bug tracker was down all morning.", "Triage found twelve new bugs after the release."],
    ),
    dict(
        rel="my dentist",
        q=["How many treatments has my dentist done?", "Which treatments did my dentist do?"],
        first="My dentist {n} did a {i} today, the treatment took an hour.",
        later=["Back at {n}'s chair for the {i}, numb for the rest of the day.", "{n} says the {i} healed nicely."],
        items=["filling", "root canal", "crown fitting", "deep cleaning", "wisdom tooth extraction", "whitening"],
        other=[
            "{n}'s practice moved to the new medical centre.",
            "{n} runs the marathon every year, says the receptionist.",
        ],
        word=["The treatment plan from the insurance arrived by post.", "The spa treatment voucher expires soon."],
    ),
]

FILLER = [
    "User: Can you help me plan meals for the week?",
    "Assistant: Sure, how many evenings will you cook at home?",
    "User: Probably four, the other nights we eat leftovers.",
    "Assistant: Then a big pot of chili on Monday covers two of them.",
    "User: The train was late again, I missed the first meeting.",
    "Assistant: Would an earlier connection help on Tuesdays?",
    "User: I want to save more this year, any simple rule?",
    "Assistant: Moving a fixed amount on payday works for many people.",
    "User: My laptop fan is loud since the update.",
    "Assistant: Check which process uses the CPU, it is often an indexer.",
    "User: What should I pack for a weekend in the mountains?",
    "Assistant: Layers, a rain jacket and good socks.",
    "User: I started running in the mornings again.",
    "Assistant: Keep the first weeks easy so your legs adapt.",
    "User: The heating bill doubled compared to last winter.",
    "Assistant: A smart thermostat schedule could cut it a little.",
    "User: Remind me to renew the passport before the trip.",
    "Assistant: Noted; renewals take about six weeks at the moment.",
    "User: We watched a documentary about octopuses, fascinating.",
    "Assistant: They can taste with their arms, which still surprises people.",
    "User: I need a gift idea for a colleague who is leaving.",
    "Assistant: A good notebook and a card signed by the team is always welcome.",
    "User: The washing machine smells musty.",
    "Assistant: Run an empty hot cycle with vinegar and leave the door open.",
    "User: I am thinking about learning Spanish.",
    "Assistant: Ten minutes a day beats an hour on Sundays.",
    "User: Our team moved the stand-up to half past nine.",
    "Assistant: That leaves you a quiet hour to start the day.",
    "User: The weather app says storms all weekend.",
    "Assistant: A good weekend for that puzzle you bought, then.",
]


def _session(rng: random.Random, date: str, planted: list[str]) -> str:
    turns = rng.sample(FILLER, rng.randint(8, 12))
    for line in planted:
        turns.insert(rng.randint(1, len(turns)), "User: " + line)
    body = "\n\n".join(turns)
    return f"---\ndate: {date}\ntype: conversation\n---\n# Chat session {date}\n\n{body}\n"


def make(name: str, seed: int, kinds: list[dict]) -> None:
    rng = random.Random(seed)
    kinds = rng.sample(kinds, len(kinds))  # which kinds get three notes differs by seed
    names = rng.sample(NAMES, len(kinds))
    notes: dict[str, str] = {}
    questions: list[tuple[str, str, str]] = []
    day = 0

    def next_date() -> str:
        nonlocal day
        day += rng.randint(1, 3)
        m, d = divmod(day, 28)
        return f"2026-{1 + m % 12:02d}-{1 + d:02d}"

    planned: list[tuple[str, list[str], str]] = []  # (kind, lines, evidence thread id)
    for t, (k, who) in enumerate(zip(kinds, names, strict=True)):
        size = 2 + t % 2  # two-note and three-note threads alternate
        items = rng.sample(k["items"], size)
        lines = [k["first"].format(n=who, i=items[0])]
        later = list(k["later"])
        rng.shuffle(later)
        lines += [later[j % len(later)].format(n=who, i=items[j]) for j in range(1, size)]
        ev = []
        for line in lines:
            planned.append(("ev", [line], f"{t}"))
            ev.append(len(planned) - 1)
        for line in k["other"]:
            planned.append(("dn", [line.format(n=who)], ""))
        for line in k["word"]:
            planned.append(("dw", [line], ""))
        for q in k["q"]:
            questions.append((f"spread{size}", f"{t}:{','.join(map(str, ev))}", q))
    for _ in range(len(kinds)):
        planned.append(("fill", [], ""))
    order = list(range(len(planned)))
    rng.shuffle(order)
    path_of: dict[int, str] = {}
    for j in order:
        date = next_date()
        path = f"chats/{date}-session.md"
        while path in notes:
            date = next_date()
            path = f"chats/{date}-session.md"
        notes[path] = _session(rng, date, planned[j][1])
        path_of[j] = path
    folder = os.path.join(HERE, name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "notes.txt"), "w", encoding="utf-8") as fh:
        for path in sorted(notes):
            fh.write(f"=== {path}\n{notes[path]}")
    with open(os.path.join(folder, "questions.tsv"), "w", encoding="utf-8") as fh:
        fh.write("# kind\tevidence notes (|)\tquestion\n")
        for kind, ev, q in questions:
            paths = "|".join(path_of[int(j)] for j in ev.split(":")[1].split(","))
            fh.write(f"{kind}\t{paths}\t{q}\n")


SETS = {
    "spread": (26, KINDS),
    "spread-test": (2626, KINDS),
}


if __name__ == "__main__":
    import sys

    for name in sys.argv[1:] or list(SETS):
        seed, kinds = SETS[name]
        make(name, seed, kinds)
        print(name, "written")
