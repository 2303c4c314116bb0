"""The MCP server's entry point for agents: ``<abs python> <abs path>/geode/mcp/main.py``.

Why a script path and not ``geode mcp`` or ``python -m geode``: an agent starts the server with
its own environment, which may have neither the virtual environment on ``PATH`` nor
``PYTHONPATH`` set. The absolute interpreter and this file's absolute path are enough: it puts the
folder that holds ``geode/`` on ``sys.path`` (site-packages, or the checkout of an editable
install) and runs ``geode mcp`` with the arguments it was given: the MCP command module alone,
parsed and failing as the whole ``geode`` program runs it (``geode.services.commandline``), so
that starting the server loads none of the other surfaces.
"""

import os
import sys


def main(argv=None) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    top = os.path.dirname(os.path.dirname(here))
    # Python put this script's folder first on sys.path; it is not a package root (geode/mcp/*.py
    # must not be importable as top-level modules), the folder that holds geode/ is.
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    if top not in sys.path:
        sys.path.insert(0, top)
    from geode.mcp import command
    from geode.services.commandline import build_program, run_program

    return run_program(build_program([command.register]), ["mcp", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
