"""``geode web``: the approval queue, the store and the health reports in a local browser page.

A Starlette app served by uvicorn on loopback, Jinja2 templates and a little plain JavaScript;
every asset ships in the package (the neighbourhood graph is drawn by Cytoscape.js, vendored in
``static/vendor``). The page reads through the rooms' APIs (``geode.queue.proposals``,
``geode.recall``, the delivery reports) and writes nothing except through the queue's own
approve, reject, undo and file. The JSON API under ``/api/`` is the one the page itself uses;
docs/WEB.md documents it. Safety (token, Host check, CSRF): ``geode.services.loopback_guard``.
"""
