"""The recall tools for agents over the Model Context Protocol (``geode mcp``): a room on top,
beside the command line and the page. ``server`` (the MCP server over the tools), ``tools``
(the tools as plain methods), ``write_note``, ``models`` (structured outputs), ``inputs``,
``routing`` (instructions and tool descriptions), ``loopback`` (HTTP and its guard),
``command`` (``geode mcp``, registered by ``geode.program.main``), ``main`` (the script an
agent runs: ``<python> <...>/geode/mcp/main.py``). Docs: docs/MCP.md.
"""
