"""The nightly upkeep: APScheduler triggers that enqueue the agents' Celery tasks."""
