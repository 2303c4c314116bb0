"""The services the surfaces share: the command line (``geode.cli``), the page (``geode.web``)
and the MCP server (``geode.mcp``) are thin adapters over them, and import none of one another.

``invocation`` (settings from a command's flags, the user-facing error, exit codes, JSON, the
records engine), ``commandline`` (the shared options, the program's parser and its entry),
``doctor`` and ``doctor_reach`` (can every part do its job?), ``crystals`` (the crystal
registry), ``filters`` (the ``--where``/``--filter`` language), ``search_server`` (the warm
search server; its client is ``geode.delivery.prompt_recall``), ``vector_build`` (the
background vector build) and ``loopback_guard`` (the Host, token and CSRF guard of the page and
of the MCP server's HTTP). Each imports its heavy dependencies inside its functions, so that
every command stays quick to start.
"""
