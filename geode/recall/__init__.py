"""Recall: the search index, passages and vectors, hybrid search, build_context,
read_note, recent_activity. The hook's prompt-time client stays in ``geode.delivery``
(standard library only); everything here may import what it needs."""
