"""The Gardener's rule 1: blocked lookups become crystal stubs (``new_note``).

**Blocked lookups -> crystal stubs** (``new_note``). Blocked lookups in the window that
share a hunted term are one group; a group of at least ``min_blocked`` rows becomes one stub
in ``stub_folder/`` whose binding is pre-filled (``on``: the action the agent was doing
before the hunt, ``bash`` when none; ``match``: the group's terms, most hunted first) and
whose essence is left empty for a person to write (an empty essence delivers nothing).

Apart from the run (``geode.gardener.agent``) because each rule is its own reading of the
ledger window and its own proposal; it is handed the run's state (``GardenerRun``: the
``[gardener]`` settings, ``notes``, ``held``, ``propose``) and reads nothing off the agent.
"""

from __future__ import annotations

import os
from collections import Counter

from geode.agents.contract import Context, Finding, Report
from geode.delivery.binding import ACTIONS
from geode.gardener.keys import GardenerRun, day_stamp
from geode.gardener.terms import slug


class Stubs:
    """One stub proposal per group of blocked lookups that share a hunted term."""

    def __init__(self, run: GardenerRun):
        self.run = run

    def check(self, ctx: Context, s, report: Report) -> None:
        parent = list(range(len(s.blocked)))

        def find(i):
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        first_of: dict[str, int] = {}
        for i, b in enumerate(s.blocked):
            for t in b.terms:
                j = first_of.setdefault(t, i)
                ri, rj = find(i), find(j)
                if ri != rj:
                    parent[max(ri, rj)] = min(ri, rj)
        groups: dict[int, list] = {}
        for i, b in enumerate(s.blocked):
            groups.setdefault(find(i), []).append(b)
        report.examined["blocked_groups"] = len(groups)
        used: set[str] = set()
        for _root, group in sorted(groups.items()):
            if len(group) < self.run.cfg.min_blocked:
                continue
            counts = Counter(t for b in group for t in dict.fromkeys(b.terms))
            terms = [t for t, _n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))][
                : self.run.cfg.max_stub_terms
            ]
            doms = Counter(b.domain for b in group if b.domain in ctx.settings.domains)
            domain = doms.most_common(1)[0][0] if doms else ctx.settings.default_domain
            root = ctx.settings.domains[domain]
            base = f"lookup-{slug(terms[:2])}"
            path, n = f"{self.run.cfg.stub_folder}/{base}.md", 1
            while path in used or os.path.lexists(os.path.join(root, path)):
                n += 1
                path = f"{self.run.cfg.stub_folder}/{base}-{n}.md"
            used.add(path)
            acts = Counter(a for b in group for a in b.before if a in ACTIONS)
            on = acts.most_common(1)[0][0] if acts else "bash"
            sessions = {b.session for b in group if b.session}
            tools = Counter(b.tool for b in group)
            ids = sorted(b.id for b in group)
            tools_s = ", ".join(f"{t} {n}" for t, n in sorted(tools.items()))
            terms_s = ", ".join(f"{t} ({counts[t]})" for t in terms)
            text = self._stub_text(
                base,
                on,
                terms,
                len(group),
                len(sessions),
                tools_s,
                terms_s,
                min(b.ts for b in group),
                max(b.ts for b in group),
                ids,
            )
            finding = Finding(
                "blocked-lookups",
                path,
                0,
                ", ".join(terms),
                f"{len(group)} blocked lookups in {len(sessions)} session(s) hunted for {terms_s}",
                domain,
                severity="info",
            )
            self.run.propose_new_note(
                ctx,
                report,
                finding,
                "stub",
                text,
                f"New crystal stub {path} ({', '.join(terms)})",
                f"{len(group)} lookups were blocked in {len(sessions)} session(s) between {day_stamp(min(b.ts for b in group))} "
                f"and {day_stamp(max(b.ts for b in group))}, hunting for {terms_s} ({tools_s}): the store did not "
                f"hand this over when it was needed. The binding is pre-filled from those commands "
                f"(on {on}); the essence is empty and delivers nothing until a person writes it.",
                ids,
                "stub not proposed",
            )

    @staticmethod
    def _stub_text(name, on, terms, n, sessions, tools_s, terms_s, first, last, ids) -> str:
        shown = ", ".join(str(i) for i in ids[:20]) + (f" and {len(ids) - 20} more" if len(ids) > 20 else "")
        match = ", ".join(terms)
        return (
            "---\n"
            f"name: {name}\n"
            'description: "<one line: what the agent was looking for; write it, or reject this stub>"\n'
            "type: fact\n"
            "crystal:\n"
            "  deliver: act\n"
            f"  on: {on}\n"
            f'  match: "{match}"\n'
            "  who: all\n"
            "---\n"
            "<!-- A stub the Gardener proposed from blocked lookups. The binding above is filled in from\n"
            "the commands that were blocked; the knowing is yours to write between the markers below.\n"
            "An empty essence delivers nothing (the Librarian reports it until it is written). -->\n"
            "<!-- crystal:essence -->\n"
            "<!-- /crystal:essence -->\n"
            "\n"
            "## Where this came from\n"
            f"{n} blocked lookups ({tools_s}) in {sessions} session(s), {day_stamp(first)} to {day_stamp(last)}; "
            f"ledger rows {shown}.\n"
            f"Terms hunted: {terms_s}.\n"
        )
