"""The revisions, one file each, named ``NNNN_slug.py`` (Alembic skips this file)."""
