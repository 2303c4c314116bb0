"""Who embeds the pending notes when a search finds some: the Celery workers, or a detached process.

With a broker configured (``GEODE_BROKER_URL`` or ``[upkeep] broker_url``), a search sends one
``geode.recall.embed_pending`` task to the upkeep queue and the workers embed (the task is
defined in ``geode.agents.celery_app``, which this room may not import: the task's name is the
contract). Without one, a detached ``python -m geode.recall.vectors`` does it, as before.
Either way the work is done under the Chroma writer lock (``vectors.embed_pending``), so a
second request while one runs embeds nothing twice.

Why the workers: embedding is the heaviest thing geode does (seconds per batch on a small CPU);
on a machine that runs workers, that is where heavy work belongs, and a worker with a GPU
embeds through it (``geode.recall.embed.best_device``).
"""

from __future__ import annotations

#: the task's name; ``geode.agents.celery_app`` registers it
TASK = "geode.recall.embed_pending"
#: notes per task: one task stays well inside the task time limit (``[upkeep] time_limit``, 30
#: minutes by default) even at a few notes a second; the task sends the next one while notes remain
TASK_LIMIT = 512


def broker_of(settings) -> str | None:
    return settings.upkeep.broker_url or None


def send_embed_task(settings, limit: int = TASK_LIMIT) -> bool:
    """Send one embedding task to the configured broker; False when there is none or it does not
    take the message (the caller starts the detached embedder instead)."""
    url = broker_of(settings)
    if not url:
        return False
    from celery import Celery
    from kombu.exceptions import OperationalError

    app = Celery("geode-recall", broker=url)
    app.conf.broker_connection_retry = False
    app.conf.broker_connection_max_retries = 0
    store = next(iter(settings.domains.values())) if settings.one_off_store else None
    try:
        app.send_task(
            TASK,
            args=(settings.home, store, limit),
            queue=settings.upkeep.queue,
            retry=False,
        )
    except (OperationalError, OSError):
        return False
    finally:
        app.close()
    return True
