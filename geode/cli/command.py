"""The command line for an agent's shell: ``<abs python> <abs path>/geode/cli/command.py search "QUERY"``.

Why a script path and not ``geode`` or ``python -m geode``: an agent runs commands with
its own environment, which may have neither the virtual environment on ``PATH`` nor
``PYTHONPATH`` set. The absolute interpreter and this file's absolute path are enough: it puts the
folder that holds ``geode/`` on ``sys.path`` (site-packages, or the checkout of an editable
install) and runs the command line with the arguments it was given. The starter note and the
lookup guard give this command (``geode.delivery.guard.agent_command``).

What it reaches: the command line's commands (``geode.cli.main``: search, read, context, recent,
deliver, lint, proposals, ...), the ones an agent's shell runs, parsed and failing exactly as
``geode`` runs them. Not the page (``geode web``, a person's) nor the MCP server (an agent
starts ``geode/mcp/main.py``): the command line imports neither surface; the whole program is
``geode`` or ``python -m geode``.
"""

import os
import sys


def main(argv=None) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    top = os.path.dirname(os.path.dirname(here))
    # Python put this script's folder first on sys.path; it is not a package root (geode/cli/*.py
    # must not be importable as top-level modules), the folder that holds geode/ is.
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    if top not in sys.path:
        sys.path.insert(0, top)
    from geode.cli.main import main as geode_main

    return geode_main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
