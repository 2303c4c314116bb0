"""The recall tools for agents over the Model Context Protocol (``geode mcp``): a room on top,
beside the command line and the page. ``server`` (the tools, their routing, the HTTP guard),
``command`` (``geode mcp``, registered through the CLI's EXTENSIONS), ``main`` (the script an
agent runs: ``<python> <...>/geode/mcp/main.py``). Docs: docs/MCP.md.
"""
