"""Sections of a team's CLAUDE.md / AGENTS.md that name commands, offered as drafts of act bindings.

A section such as "Run the unit tests with `npm test -- --runInBand`" is knowledge bound to an
action: an agent about to run ``npm test`` should have it. geode does not mint that binding
from a file it merely read. It files a ``new_note`` draft in the approval queue (the default
domain, folder ``team/<domain>/``): the binding filled in from the commands the section names
(``on: bash``, ``match:`` those commands), the provenance (file, line, section, the commands),
and the essence left for the person to write, pointing at the section rather than copying a
sentence of it (the Gardener's rule: nothing it files carries a sentence taken from a note or a
document). A draft a person rejects is held back by the filing gate when the same section
proposes it again (``geode.agents.filing``: same changes, same finding).

Standard library, the kernel's reader and the queue's draft builders; called by the Gardener
before it reads the ledger, so a team's commands are offered even while the ledger is young.
"""

from __future__ import annotations

import os

from geode.agents.contract import Context, Finding, Proposed, Report
from geode.delivery import team_sync
from geode.gardener.keys import proposal_key
from geode.kernel import team_rules as tr

#: what a draft's kind of finding is called (its evidence)
FINDING = "team-section-names-commands"
#: at most this many commands bound by one draft (the first ones the section names)
MAX_TERMS = 6


def draft_text(domain: str, repo: str, section: tr.Section) -> str:
    """The draft crystal of one section: binding and provenance from the file, essence to write."""
    terms = list(section.commands[:MAX_TERMS])
    match = "\n".join(f"    - {team_sync.yaml_quoted(t)}" for t in terms)
    cmds = "\n".join(f"- `{t}`" for t in terms)
    return (
        "---\n"
        f"name: {team_sync.yaml_quoted('team ' + section.slug)}\n"
        f"title: {team_sync.yaml_quoted(section.title)}\n"
        "type: runbook\n"
        f"team_source: {team_sync.yaml_quoted(section.source)}\n"
        f"team_line: {section.line}\n"
        f"team_repo: {team_sync.yaml_quoted(repo)}\n"
        "crystal:\n"
        "  deliver: act\n"
        "  on: bash\n"
        "  match:\n"
        f"{match}\n"
        "---\n"
        "<!-- crystal:essence -->\n"
        "TODO: what an agent must know before it runs these commands (the team's section is named "
        "in team_source and team_line above).\n"
        "<!-- /crystal:essence -->\n\n"
        "## Where this came from\n\n"
        f"A section of the team's own memory (team_source, line {section.line}), read by geode for "
        f"the team-rules domain `{domain}`. It names these commands:\n\n"
        f"{cmds}\n"
    )


def propose(ctx: Context, report: Report, run_name: str = "gardener") -> int:
    """File a draft for each team section that names commands; returns how many were offered."""
    from geode.queue.changes import new_note_change
    from geode.queue.proposals import ProposalDraft, ProposalError

    settings = ctx.settings
    target = settings.default_domain
    if target in team_sync.team_domains(settings):
        return 0
    root = settings.domains[target]
    offered = 0
    for domain, repo in team_sync.team_domains(settings).items():
        _notes, _globs, _troubles, sections = team_sync.derive(repo)
        for s in sections:
            if s.kind != "section" or not s.commands:
                continue
            path = f"team/{domain}/{tr.slugify(s.source)}-{s.slug}.md"
            if os.path.lexists(os.path.join(root, path)):
                continue  # the person made it a crystal already (or wrote that file)
            try:
                change = new_note_change(settings, target, path, draft_text(domain, repo, s))
            except ProposalError:
                continue
            finding = Finding(
                FINDING,
                path,
                0,
                f"{s.source}:{s.line}",
                f"{s.source} line {s.line} ({s.title}) names {len(s.commands)} command(s): "
                f"{', '.join(s.commands[:MAX_TERMS])}",
                target,
                severity="info",
            )
            report.findings.append(finding)
            draft = ProposalDraft(
                run_name,
                "new_note",
                target,
                f"Bind {s.title} to its commands",
                "A section of the team's own memory names these commands; as a crystal it would be "
                "delivered when an agent runs them. The essence is left for you to write.",
                [],
                [change],
                ctx.run_id,
                proposal_key("team", target, path),
            )
            report.proposed.append(Proposed(draft, [finding]))
            offered += 1
    report.examined["team_sections"] = report.examined.get("team_sections", 0) + offered
    return offered
