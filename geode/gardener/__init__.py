"""The Gardener: grows the store from the usage ledger, never from text it merely read.

``geode.gardener.agent:Gardener`` is the agent (looked up by ``geode.agents.upkeep``), its four rules in
``stubs``, ``never_fired``, ``bind`` and ``salience`` (sharing ``keys``); ``terms`` turns the
commands, tool inputs and search queries recorded in the ledger into match terms; ``scan``
reads the ledger window once; ``edits`` changes frontmatter lines as bytes and checks the result.
"""
