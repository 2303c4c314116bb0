"""Generate the long-note evaluation sets: weekly meeting logs with facts planted at known places.

    python bench/recall_sets/make_longmem.py                 # writes every set below
    python bench/recall_sets/make_longmem.py longmem-test    # one of them

Why a generator: the evidence of every question must be known exactly (which notes, which line),
the notes must be long (3,000+ characters: many sessions of dialogue, as in the multi-session
benchmarks where one vector per note fails), and the set must be rebuilt identically (fixed seed).

Each note is one meeting of a team, in Markdown: frontmatter (date, tags: the people and the
named things discussed), ``# <meeting> <date>``, ``## Attendees``, ``## Discussion`` (dialogue
turns ``Name: ...``), ``## Decisions`` and ``## Action items`` (list items). Between 60 and 75
filler turns of ordinary meeting talk (the same systems and people recur everywhere, so a name in
a question does not point at one note) surround the planted facts, which land at a random depth.

Facts: single facts (one note answers) and pairs (two notes are needed: the second half names a
thing the first half introduced, e.g. "the intern who started in May built ..."). A later half
links the earlier note (``[[name]]``) in two pairs out of three, as meeting logs do when they
follow up; the third pair shares only an entity tag. Questions are paraphrases in English (they
avoid the planted sentence's content words where they can; names of people and systems stay).

``longmem``: 24 English notes, 112 questions (40 need two notes).
``crossling``: 20 notes (10 German, 10 French), English questions, 68 questions (20 need two).
``longmem-test``: 30 English notes, 122 questions (50 need two); ``crossling-test``: 24 notes
(12 German, 12 French), 90 questions (30 need two). The same recipe from other seeds: held-out
test sets, never used to choose a parameter (``longmem`` and ``crossling`` are the dev sets).
"""

from __future__ import annotations

import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))

PEOPLE = ["Priya", "Jonas", "Mei", "Tomas", "Aisha", "Lukas", "Sofia", "Daniel", "Ingrid", "Rafael", "Nora", "Kenji"]
NEWCOMERS = [
    "Leonie",
    "Farid",
    "Camille",
    "Oskar",
    "Yara",
    "Matteo",
    "Elif",
    "Bruno",
    "Hana",
    "Ruben",
    "Greta",
    "Anouk",
]
SYSTEMS = [
    "Atlas",
    "the billing portal",
    "Harbor",
    "the mobile app",
    "Lighthouse",
    "the data warehouse",
    "Kestrel",
    "the partner API",
]
VENDORS = [
    "Quillbank",
    "Norvane",
    "Bluecrest",
    "Tessaro",
    "Valtrix",
    "Omnisky",
    "Drayfield",
    "Carrow Systems",
    "Pellin",
    "Zantor",
]
CUSTOMERS = [
    "Fennick Retail",
    "Obermann Logistik",
    "Maison Lebrun",
    "Kirsch & Co",
    "Aldera Foods",
    "Stavros Shipping",
    "Helio Clinics",
    "Brindle Media",
]
CITIES = ["Lisbon", "Tallinn", "Valencia", "Porto", "Leipzig", "Ghent", "Bologna", "Krakow", "Lyon", "Bergen"]
MONTHS = ["March", "April", "May", "June", "July", "August", "September", "October"]
FOODS = ["peanuts", "shellfish", "gluten", "sesame", "dairy", "mushrooms", "eggs", "celery"]
TOOLS = [
    ("PagerDuty", "Opsgenie"),
    ("Opsgenie", "Grafana OnCall"),
    ("VictorOps", "PagerDuty"),
    ("Pushover", "incident.io"),
]
ROLES = ["data engineer", "designer", "support lead", "security engineer", "product manager", "QA engineer"]
CAUSES = [
    (
        "an expired TLS certificate on the load balancer",
        "ein abgelaufenes TLS-Zertifikat am Load Balancer",
        "un certificat TLS expiré sur le répartiteur de charge",
    ),
    (
        "a full disk on the primary database",
        "eine volle Festplatte auf der primären Datenbank",
        "un disque plein sur la base de données principale",
    ),
    (
        "a DNS record deleted by mistake",
        "ein versehentlich gelöschter DNS-Eintrag",
        "un enregistrement DNS supprimé par erreur",
    ),
    (
        "a memory leak in the image resizer",
        "ein Speicherleck im Bildskalierer",
        "une fuite de mémoire dans le redimensionneur d'images",
    ),
    (
        "a cloud provider network partition",
        "eine Netzwerkpartition beim Cloud-Anbieter",
        "une partition réseau chez le fournisseur cloud",
    ),
]
MONTHS_DE = dict(zip(MONTHS, ["März", "April", "Mai", "Juni", "Juli", "August", "September", "Oktober"], strict=True))
MONTHS_FR = dict(zip(MONTHS, ["mars", "avril", "mai", "juin", "juillet", "août", "septembre", "octobre"], strict=True))
FOODS_DE = dict(
    zip(
        FOODS,
        ["Erdnüsse", "Meeresfrüchte", "Gluten", "Sesam", "Milchprodukte", "Pilze", "Eier", "Sellerie"],
        strict=True,
    )
)
FOODS_FR = dict(
    zip(
        FOODS,
        [
            "les cacahuètes",
            "les fruits de mer",
            "le gluten",
            "le sésame",
            "les produits laitiers",
            "les champignons",
            "les œufs",
            "le céleri",
        ],
        strict=True,
    )
)
ROLES_DE = dict(
    zip(
        ROLES,
        ["Data Engineer", "Designerin", "Support-Leitung", "Security Engineer", "Produktmanagerin", "QA-Ingenieurin"],
        strict=True,
    )
)
ROLES_FR = dict(
    zip(
        ROLES,
        [
            "ingénieure données",
            "designer",
            "responsable support",
            "ingénieure sécurité",
            "cheffe de produit",
            "ingénieure QA",
        ],
        strict=True,
    )
)

# -- single facts: (sentence en, de, fr, question) --------------------------------------------------
SINGLE = {
    "budget": (
        "Finance confirmed it this morning: the {S} budget for next quarter is capped at {N} thousand euros, no exceptions.",
        "Die Finanzabteilung hat es heute Morgen bestätigt: Das Budget für {S} im nächsten Quartal ist auf {N} Tausend Euro gedeckelt, ohne Ausnahmen.",
        "La finance l'a confirmé ce matin : le budget de {S} pour le prochain trimestre est plafonné à {N} mille euros, sans exception.",
        "How much money may be spent on {S} over the coming three months?",
    ),
    "vendor": (
        "We signed the contract with {V} to host {S}; they take over the servers in {M}.",
        "Wir haben den Vertrag mit {V} für das Hosting von {S} unterschrieben; sie übernehmen die Server im {Mde}.",
        "Nous avons signé le contrat avec {V} pour l'hébergement de {S} ; ils reprennent les serveurs en {Mfr}.",
        "Which supplier will run the machines behind {S}, and starting when?",
    ),
    "move": (
        "Some personal news: I am relocating to {C} at the end of {M} and will keep working remotely from there.",
        "Eine private Neuigkeit: Ich ziehe Ende {Mde} nach {C} und arbeite von dort aus weiter remote.",
        "Une nouvelle personnelle : je déménage à {C} fin {Mfr} et je continuerai à travailler à distance depuis là-bas.",
        "To which city is {P} going to live?",
    ),
    "outage": (
        "The post-mortem is done: the {S} outage on Tuesday night was caused by {R}.",
        "Die Nachbetrachtung ist fertig: Der Ausfall von {S} in der Nacht auf Dienstag wurde durch {Rde} verursacht.",
        "Le post-mortem est terminé : la panne de {S} mardi soir a été causée par {Rfr}.",
        "What was the root cause when {S} went down overnight?",
    ),
    "hire": (
        "Good news, {Q} accepted our offer as the new {role} and starts on the first of {M}.",
        "Gute Nachricht: {Q} hat unser Angebot als neue {role_de} angenommen und fängt am ersten {Mde} an.",
        "Bonne nouvelle : {Q} a accepté notre offre comme {role_fr} et commence le premier {Mfr}.",
        "Who is joining us as {role}?",
    ),
    "delay": (
        "The {S} launch slips to the middle of {M}, because the external security review is still open.",
        "Der Start von {S} verschiebt sich auf Mitte {Mde}, weil die externe Sicherheitsprüfung noch offen ist.",
        "Le lancement de {S} glisse à la mi-{Mfr}, parce que l'audit de sécurité externe n'est pas terminé.",
        "When will {S} go live now, and what is holding it up?",
    ),
    "latency": (
        "Since the cache rollout, {S} answers in {N} milliseconds at the 95th percentile, down from almost a second.",
        "Seit dem Cache-Rollout antwortet {S} beim 95. Perzentil in {N} Millisekunden, vorher war es fast eine Sekunde.",
        "Depuis le déploiement du cache, {S} répond en {N} millisecondes au 95e centile, contre presque une seconde avant.",
        "How quick are responses from {S} after the caching work?",
    ),
    "food": (
        "For the team dinner on Friday, please remember that I cannot eat {F}.",
        "Denkt bitte beim Teamessen am Freitag daran, dass ich keine {F_de} vertrage.",
        "Pour le dîner d'équipe vendredi, n'oubliez pas que je ne peux pas manger {F_fr}.",
        "What should the restaurant leave out of {P}'s meal?",
    ),
    "tool": (
        "Decision for the {S} on-call: we drop {T1} and move all paging to {T2} next sprint.",
        "Entscheidung zur Rufbereitschaft für {S}: Wir geben {T1} auf und stellen alle Alarmierungen im nächsten Sprint auf {T2} um.",
        "Décision pour l'astreinte de {S} : on abandonne {T1} et toutes les alertes passent sur {T2} au prochain sprint.",
        "Which product replaces {T1} for waking up the engineer on duty for {S}?",
    ),
    "churn": (
        "{K} told us they will cancel unless the CSV export bug is fixed by the end of {M}.",
        "{K} hat uns gesagt, dass sie kündigen, wenn der Fehler im CSV-Export nicht bis Ende {Mde} behoben ist.",
        "{K} nous a dit qu'ils résilieront si le bug de l'export CSV n'est pas corrigé d'ici fin {Mfr}.",
        "Which client threatens to leave unless the broken spreadsheet download is repaired before the end of {M}?",
    ),
    "run": (
        "Off topic, but I finally finished the {N} kilometre trail run in the mountains last weekend.",
        "Kleiner Exkurs: Ich habe letztes Wochenende endlich den {N}-Kilometer-Traillauf in den Bergen geschafft.",
        "Hors sujet, mais j'ai enfin terminé le trail de {N} kilomètres en montagne le week-end dernier.",
        "How long was the race that {P} completed recently?",
    ),
    "office": (
        "Facilities wrote that the {C} meeting room closes for renovation from the first week of {M}; we use the kitchen meanwhile.",
        "Die Hausverwaltung schreibt, dass der Besprechungsraum {C} ab der ersten Woche im {Mde} renoviert wird; solange nutzen wir die Küche.",
        "Les services généraux écrivent que la salle de réunion {C} ferme pour travaux dès la première semaine de {Mfr} ; en attendant on utilise la cuisine.",
        "From when will the {C} room be shut for building works?",
    ),
}

# -- pairs: (first half en/de/fr, second half en/de/fr, question) ------------------------------------
PAIRS = {
    "intern": (
        (
            "Please welcome {Q}, our new intern, who started this {M}.",
            "Bitte begrüßt {Q}, unsere neue Praktikantin, die diesen {Mde} angefangen hat.",
            "Souhaitez la bienvenue à {Q}, notre nouvelle stagiaire, arrivée ce {Mfr}.",
        ),
        (
            "{Q} built the on-call dashboard for {S} on her own, it is already in use.",
            "{Q} hat das Bereitschafts-Dashboard für {S} allein gebaut, es ist schon im Einsatz.",
            "{Q} a construit toute seule le tableau de bord d'astreinte pour {S}, il est déjà utilisé.",
        ),
        "What did the intern who arrived in {M} create?",
    ),
    "leave": (
        (
            "I will be on parental leave from the middle of {M} for four months.",
            "Ich bin ab Mitte {Mde} für vier Monate in Elternzeit.",
            "Je serai en congé parental à partir de la mi-{Mfr} pendant quatre mois.",
        ),
        (
            "While {P} is away on leave, {P2} takes over the {S} on-call rotation.",
            "Während {P} in Elternzeit ist, übernimmt {P2} die Rufbereitschaft für {S}.",
            "Pendant le congé de {P}, {P2} reprend l'astreinte de {S}.",
        ),
        "Who covers {S} duty during {P}'s absence, and from when is {P} away?",
    ),
    "quote": (
        (
            "My proposal for the {S} migration is {V}; they already handle our backups.",
            "Mein Vorschlag für die Migration von {S} ist {V}; die machen schon unsere Backups.",
            "Ma proposition pour la migration de {S}, c'est {V} ; ils gèrent déjà nos sauvegardes.",
        ),
        (
            "{V} sent their offer: {N} hundred euros a month with a one-year minimum term.",
            "{V} hat das Angebot geschickt: {N} hundert Euro im Monat bei einem Jahr Mindestlaufzeit.",
            "{V} a envoyé son offre : {N} cents euros par mois avec un engagement d'un an minimum.",
        ),
        "What monthly price did the company {P} recommended for moving {S} ask for?",
    ),
    "customer": (
        (
            "{K} is now our largest customer, worth {N} thousand euros a year.",
            "{K} ist jetzt unser größter Kunde, {N} Tausend Euro im Jahr wert.",
            "{K} est désormais notre plus gros client, {N} mille euros par an.",
        ),
        (
            "{K} asked for single sign-on through their Azure tenant before the end of {M}.",
            "{K} will Single Sign-on über ihren Azure-Tenant bis Ende {Mde}.",
            "{K} demande l'authentification unique via leur tenant Azure avant fin {Mfr}.",
        ),
        "What does our biggest client require by the end of {M}, and how much revenue do they bring?",
    ),
    "incident": (
        (
            "{S} was down for two hours; the cause was {R}.",
            "{S} war zwei Stunden ausgefallen; die Ursache war {Rde}.",
            "{S} a été indisponible deux heures ; la cause était {Rfr}.",
        ),
        (
            "The permanent fix for the {S} incident is deployed, and {P2} wrote the runbook for it.",
            "Die dauerhafte Lösung für den Vorfall bei {S} ist ausgerollt, und {P2} hat das Runbook dazu geschrieben.",
            "Le correctif définitif de l'incident de {S} est déployé, et {P2} a rédigé le runbook.",
        ),
        "Who documented the procedure for the {S} failure, and what had caused that failure?",
    ),
}

FILLER = {
    "en": [
        "I looked at the sprint board, we are roughly on track for {S}.",
        "Can we keep the stand-up shorter this week? It ran to forty minutes on Monday.",
        "The flaky integration test in {S} failed twice again, I will quarantine it.",
        "I reviewed the pull request for {S}, two small comments, otherwise fine.",
        "Let's not forget the retro on Thursday, I booked the small room.",
        "Support tickets are stable, about the same volume as last week.",
        "The staging environment was slow yesterday afternoon, probably the nightly import.",
        "I paired with {P2} on the logging cleanup, it went well.",
        "Documentation for {S} is still thin, I will write the onboarding page.",
        "Has anyone tried the new laptop images? Mine booted fine.",
        "We should rotate the demo account passwords before the customer workshop.",
        "I need a second reviewer for the database migration script in {S}.",
        "The design team shared new mock-ups, they are in the shared drive.",
        "Dependency updates are merged, nothing broke in {S} as far as I can see.",
        "I will be out on Wednesday afternoon for a doctor's appointment.",
        "The metrics dashboard for {S} still shows the old error budget.",
        "Let's move the architecture discussion to next week, we are out of time.",
        "{P2} asked whether we can drop the legacy endpoint in {S}; I think yes, after the freeze.",
        "The coffee machine on our floor is broken again, facilities know.",
        "I cleaned up the alert rules, there should be less noise at night now.",
        "Release notes for the last version of {S} went out yesterday.",
        "Someone should check the backup restore drill results, the report came in.",
        "We had a good call with the partner team, follow-up notes are in the wiki.",
        "I am still waiting for access to the analytics workspace.",
        "The load test for {S} is scheduled for Friday morning.",
        "The translation strings for the settings page are done.",
        "Can someone take the customer escalation about slow exports? I am overloaded.",
        "We still have not decided on the naming of the new feature flags.",
        "I moved two tickets from this sprint to the backlog, they were too big.",
        "The budget review went fine, no surprises this time.",
        "Reminder: the security training is due by the end of the month.",
        "I updated the runbook for restarting the workers in {S}.",
    ],
    "de": [
        "Ich habe mir das Sprint-Board angeschaut, für {S} sind wir ungefähr im Plan.",
        "Können wir das Stand-up diese Woche kürzer halten? Am Montag waren es vierzig Minuten.",
        "Der wackelige Integrationstest in {S} ist wieder zweimal fehlgeschlagen, ich nehme ihn raus.",
        "Ich habe den Pull-Request für {S} gelesen, zwei kleine Anmerkungen, sonst gut.",
        "Vergesst die Retro am Donnerstag nicht, ich habe den kleinen Raum gebucht.",
        "Die Support-Tickets sind stabil, etwa so viele wie letzte Woche.",
        "Die Staging-Umgebung war gestern Nachmittag langsam, vermutlich der nächtliche Import.",
        "Ich habe mit {P2} am Aufräumen der Logs gearbeitet, das lief gut.",
        "Die Dokumentation für {S} ist noch dünn, ich schreibe die Einstiegsseite.",
        "Hat jemand die neuen Laptop-Images ausprobiert? Meins startet problemlos.",
        "Wir sollten die Passwörter der Demo-Konten vor dem Kundenworkshop ändern.",
        "Ich brauche eine zweite Durchsicht für das Migrationsskript in {S}.",
        "Das Design-Team hat neue Entwürfe geteilt, sie liegen im gemeinsamen Laufwerk.",
        "Die Abhängigkeiten sind aktualisiert, in {S} ist soweit nichts kaputt gegangen.",
        "Ich bin am Mittwochnachmittag wegen eines Arzttermins nicht da.",
        "Das Metrik-Dashboard für {S} zeigt noch das alte Fehlerbudget.",
        "Lasst uns die Architekturdiskussion auf nächste Woche schieben, die Zeit ist um.",
        "{P2} hat gefragt, ob wir den alten Endpunkt in {S} abschalten können; ich denke ja, nach dem Freeze.",
        "Die Kaffeemaschine auf unserem Stockwerk ist wieder kaputt, die Hausverwaltung weiß Bescheid.",
        "Ich habe die Alarmregeln aufgeräumt, nachts sollte es jetzt ruhiger sein.",
        "Die Release Notes der letzten Version von {S} sind gestern rausgegangen.",
        "Jemand sollte die Ergebnisse der Wiederherstellungsübung prüfen, der Bericht ist da.",
        "Wir hatten ein gutes Gespräch mit dem Partnerteam, die Notizen stehen im Wiki.",
        "Ich warte immer noch auf den Zugang zum Analyse-Workspace.",
        "Der Lasttest für {S} ist für Freitagvormittag geplant.",
        "Die Übersetzungen für die Einstellungsseite sind fertig.",
        "Kann jemand die Kundeneskalation zu langsamen Exporten übernehmen? Ich bin überlastet.",
        "Wir haben uns immer noch nicht auf die Namen der neuen Feature-Flags geeinigt.",
    ],
    "fr": [
        "J'ai regardé le tableau du sprint, on est à peu près dans les temps pour {S}.",
        "On peut faire un stand-up plus court cette semaine ? Lundi, ça a duré quarante minutes.",
        "Le test d'intégration instable de {S} a encore échoué deux fois, je le mets en quarantaine.",
        "J'ai relu la pull request pour {S}, deux petites remarques, sinon c'est bon.",
        "N'oubliez pas la rétro jeudi, j'ai réservé la petite salle.",
        "Les tickets de support sont stables, à peu près le même volume que la semaine dernière.",
        "L'environnement de préproduction était lent hier après-midi, sans doute l'import de nuit.",
        "J'ai travaillé en binôme avec {P2} sur le nettoyage des logs, ça s'est bien passé.",
        "La documentation de {S} est encore maigre, je vais écrire la page d'accueil.",
        "Quelqu'un a essayé les nouvelles images des portables ? Le mien démarre bien.",
        "Il faudrait changer les mots de passe des comptes de démo avant l'atelier client.",
        "J'ai besoin d'une deuxième relecture pour le script de migration de {S}.",
        "L'équipe design a partagé de nouvelles maquettes, elles sont sur le drive commun.",
        "Les mises à jour des dépendances sont fusionnées, rien n'a cassé dans {S} à ma connaissance.",
        "Je serai absent mercredi après-midi pour un rendez-vous chez le médecin.",
        "Le tableau de bord des métriques de {S} affiche encore l'ancien budget d'erreurs.",
        "Reportons la discussion d'architecture à la semaine prochaine, on n'a plus le temps.",
        "{P2} a demandé si on peut supprimer l'ancien endpoint de {S} ; je pense que oui, après le gel.",
        "La machine à café de notre étage est encore en panne, les services généraux sont au courant.",
        "J'ai nettoyé les règles d'alerte, il devrait y avoir moins de bruit la nuit.",
        "Les notes de version de la dernière version de {S} sont parties hier.",
        "Quelqu'un devrait vérifier les résultats de l'exercice de restauration, le rapport est arrivé.",
        "On a eu un bon appel avec l'équipe partenaire, les notes sont dans le wiki.",
        "J'attends toujours l'accès à l'espace d'analyse.",
        "Le test de charge de {S} est prévu vendredi matin.",
        "Les traductions de la page des paramètres sont terminées.",
        "Quelqu'un peut prendre l'escalade client sur les exports lents ? Je suis débordé.",
        "On n'a toujours pas décidé du nommage des nouveaux feature flags.",
    ],
}
HEAD = {
    "en": ("Weekly team sync", "Attendees", "Discussion", "Decisions", "Action items", "Follow-up of"),
    "de": ("Wöchentliches Team-Meeting", "Teilnehmende", "Diskussion", "Entscheidungen", "Aufgaben", "Fortsetzung von"),
    "fr": ("Réunion d'équipe hebdomadaire", "Participants", "Discussion", "Décisions", "Actions", "Suite de"),
}
DECISIONS = {
    "en": [
        "Keep the release train on Tuesdays.",
        "Freeze schema changes during the audit.",
        "Review the alert thresholds next month.",
        "Move the retro to Thursdays.",
    ],
    "de": [
        "Der Release-Zug bleibt am Dienstag.",
        "Keine Schemaänderungen während des Audits.",
        "Die Alarmschwellen nächsten Monat überprüfen.",
        "Die Retro auf Donnerstag verlegen.",
    ],
    "fr": [
        "Le train de release reste le mardi.",
        "Gel des changements de schéma pendant l'audit.",
        "Revoir les seuils d'alerte le mois prochain.",
        "Déplacer la rétro au jeudi.",
    ],
}
ACTIONS = {
    "en": [
        "{P} to update the runbook.",
        "{P} to book the workshop room.",
        "{P} to check the backup report.",
        "{P} to draft the release notes.",
    ],
    "de": [
        "{P} aktualisiert das Runbook.",
        "{P} bucht den Workshop-Raum.",
        "{P} prüft den Backup-Bericht.",
        "{P} schreibt die Release Notes.",
    ],
    "fr": [
        "{P} met à jour le runbook.",
        "{P} réserve la salle d'atelier.",
        "{P} vérifie le rapport de sauvegarde.",
        "{P} rédige les notes de version.",
    ],
}


def _slots(rng: random.Random) -> dict:
    m = rng.choice(MONTHS)
    f = rng.choice(FOODS)
    role = rng.choice(ROLES)
    r = rng.choice(CAUSES)
    t1, t2 = rng.choice(TOOLS)
    p, p2 = rng.sample(PEOPLE, 2)
    return {
        "P": p,
        "P2": p2,
        "S": rng.choice(SYSTEMS),
        "V": rng.choice(VENDORS),
        "K": rng.choice(CUSTOMERS),
        "C": rng.choice(CITIES),
        "M": m,
        "Mde": MONTHS_DE[m],
        "Mfr": MONTHS_FR[m],
        "N": rng.choice(range(12, 95)),
        "F": f,
        "F_de": FOODS_DE[f],
        "F_fr": FOODS_FR[f],
        "role": role,
        "role_de": ROLES_DE[role],
        "role_fr": ROLES_FR[role],
        "R": r[0],
        "Rde": r[1],
        "Rfr": r[2],
        "T1": t1,
        "T2": t2,
        "Q": rng.choice(NEWCOMERS),
    }


def _entity(kind: str, s: dict) -> str:
    """The named thing a fact is about (a tag of the note it lands in)."""
    return {"intern": s["Q"], "leave": s["P"], "quote": s["V"], "customer": s["K"], "incident": s["S"]}.get(kind, "")


def _tag(x: str) -> str:
    return x.lower().replace("the ", "").replace(" & ", "-").replace(" ", "-")


def build(name: str, langs: list[str], n_notes: int, single_per_kind: int, pairs_per_kind: int, seed: int) -> None:
    rng = random.Random(seed)
    notes = [{"lang": langs[i % len(langs)], "planted": [], "links": [], "tags": set()} for i in range(n_notes)]
    day0 = 5
    for i, nt in enumerate(notes):
        nt["date"] = f"2026-{3 + (day0 + 7 * i) // 28:02d}-{1 + (day0 + 7 * i) % 28:02d}"
        nt["name"] = f"{nt['date']}-team-sync"
    questions = []  # (kind, [note indexes], question)
    used = set()
    for kind, (en, de, fr, q) in SINGLE.items():
        for _ in range(single_per_kind):
            s = _slots(rng)
            for _try in range(1000):  # one answer per question: no two facts with the same question
                if (kind, q.format(**s)) not in used:
                    break
                s = _slots(rng)
            else:
                raise SystemExit(f"{kind}: not enough distinct slot values for {single_per_kind} questions")
            used.add((kind, q.format(**s)))
            i = rng.randrange(n_notes)
            sent = {"en": en, "de": de, "fr": fr}[notes[i]["lang"]].format(**s)
            notes[i]["planted"].append((s["P"], sent, len(questions)))
            questions.append(["single", [i], q.format(**s)])
    for kind, (a, b, q) in PAIRS.items():
        for k in range(pairs_per_kind):
            s = _slots(rng)
            i, j = sorted(rng.sample(range(n_notes), 2))
            la = {"en": 0, "de": 1, "fr": 2}
            notes[i]["planted"].append((s["P"], a[la[notes[i]["lang"]]].format(**s), len(questions)))
            notes[j]["planted"].append(
                (s["P2"] if kind != "leave" else s["P2"], b[la[notes[j]["lang"]]].format(**s), len(questions))
            )
            ent = _tag(_entity(kind, s))
            notes[i]["tags"].add(ent)
            notes[j]["tags"].add(ent)
            if k % 3 != 2:
                notes[j]["links"].append(notes[i]["name"])
            questions.append(["multi", [i, j], q.format(**s)])
    evidence_lines: dict[int, list[str]] = {}
    out_notes = {}
    for nt in notes:
        lang = nt["lang"]
        title, att, disc, dec, act, follow = HEAD[lang]
        people = rng.sample(PEOPLE, 5)
        turns = []
        for _ in range(rng.randint(34, 42)):
            s = _slots(rng)
            turns.append((rng.choice(people), rng.choice(FILLER[lang]).format(**s)))
        for who, sent, qi in nt["planted"]:
            pos = rng.randrange(3, len(turns))  # never the first few turns: the fact sits deep
            turns.insert(pos, (who, sent, qi))
        lines = [
            "---",
            f"date: {nt['date']}",
            f"description: {title} {nt['date']}",
            "type: meeting",
            f"tags: [{', '.join(sorted({*(p.lower() for p in people), *nt['tags']}))}]",
            "---",
            f"# {title} {nt['date']}",
            "",
            f"## {att}",
            "",
            ", ".join(people),
            "",
        ]
        if nt["links"]:
            lines += [f"{follow} " + ", ".join(f"[[{x}]]" for x in sorted(set(nt["links"]))), ""]
        lines += [f"## {disc}", ""]
        for t in turns:
            who, sent = t[0], t[1]
            if len(t) == 3:
                evidence_lines.setdefault(t[2], []).append(f"{nt['name']}.md:{len(lines) + 1}")
            lines.append(f"{who}: {sent}")
            lines.append("")
        lines += [f"## {dec}", ""] + [f"- {d}" for d in rng.sample(DECISIONS[lang], 2)] + [""]
        lines += [f"## {act}", ""] + [f"- {a.format(P=rng.choice(people))}" for a in rng.sample(ACTIONS[lang], 3)]
        out_notes[f"meetings/{nt['name']}.md"] = "\n".join(lines) + "\n"
    folder = os.path.join(HERE, name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "notes.txt"), "w", encoding="utf-8") as fh:
        for path, text in out_notes.items():
            fh.write(f"=== {path}\n{text}")
    with open(os.path.join(folder, "questions.tsv"), "w", encoding="utf-8") as fh:
        fh.write("# kind\tevidence notes (|)\tquestion\tevidence lines\n")
        for qi, (kind, idxs, q) in enumerate(questions):
            paths = "|".join(f"meetings/{notes[i]['name']}.md" for i in idxs)
            fh.write(f"{kind}\t{paths}\t{q}\t{' '.join(evidence_lines.get(qi, []))}\n")
    short = [p for p, t in out_notes.items() if len(t) < 3000]
    assert not short, f"{name}: notes under 3,000 characters: {short}"
    print(
        f"{name}: {len(out_notes)} notes ({min(map(len, out_notes.values()))}-{max(map(len, out_notes.values()))} characters), "
        f"{len(questions)} questions ({sum(1 for q in questions if q[0] == 'multi')} need two notes)"
    )


#: the dev sets (the blend's parameters are chosen on them) and the test sets (never used for
#: choosing: the same recipe from other seeds, more notes and more questions per kind)
SETS = {
    "longmem": (["en"], 24, 6, 8, 20261130),
    "crossling": (["de", "fr"], 20, 4, 4, 20261131),
    "longmem-test": (["en"], 30, 6, 10, 7340021),
    "crossling-test": (["de", "fr"], 24, 5, 6, 7340022),
}


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sets", nargs="*", help=f"which sets to write (default: all of {', '.join(SETS)})")
    a = p.parse_args(argv)
    for name in a.sets or list(SETS):
        if name not in SETS:
            raise SystemExit(f"unknown set {name!r}: expected one of {', '.join(SETS)}")
        langs, n_notes, singles, pairs, seed = SETS[name]
        build(name, langs, n_notes, singles, pairs, seed=seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
