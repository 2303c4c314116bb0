"""The one ``geode`` program, put together on top of the house: the command line's commands
(``geode.cli``), the page's ``geode web`` (``geode.web``) and the MCP server's ``geode mcp``
(``geode.mcp``) in one parser. The console script ``geode`` and ``python -m geode`` run
``geode.program.main``; docs/CLI.md is generated from it (``geode.program.doc``).

Why a room of its own: the three surfaces sit side by side and import none of one another; only
this room, which nothing imports, may know all three.
"""
