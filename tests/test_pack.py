"""The budget packer: everything printed counts, whole notes only, a stated order, and an
oversize note cut last with a visible mark, never pushing out notes that fit."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from geode.delivery.pack import Item, cut_boot, header, order, pack, render


def item(
    name: str, size: int, *, salience: float = 0.5, carried: bool = False, term: str = "tail", path: str | None = None
) -> Item:
    path = path or f"{name}.md"
    essence = (f"{name}: " + "x" * size)[:size] if size >= len(name) + 2 else "y" * size
    return Item(f"main:{path}", "main", path, f"/store/{path}", name, term, essence, salience, carried, "h")


def names(seq) -> list[str]:
    return [x[0].name if isinstance(x, tuple) else x.name for x in seq]


def test_budget_counts_everything_printed():
    items = [item("a", 950), item("b", 950), item("c", 950), item("d", 950), item("e", 950)]
    delivered, skipped, text = pack(items, 4000, "bash")
    assert len(text) <= 4000
    assert text == header("bash") + "".join(block for _it, block, _t in delivered)
    assert len(text) == len(header("bash")) + sum(len(b) for _i, b, _t in delivered)
    # each block is the why line plus the essence: the line counts too
    for it, block, _t in delivered:
        assert block == render(it, "bash") and len(block) > len(it.essence)
    assert len(delivered) == 3 and len(skipped) == 2  # 4 * 950 essences would fit without the lines


def test_whole_notes_only_and_skipped_are_returned():
    items = [item("a", 1500), item("b", 1500), item("c", 1500)]
    delivered, skipped, text = pack(items, 4000, "bash")
    assert names(delivered) == ["a", "b"] and names(skipped) == ["c"]
    for it, _block, truncated in delivered:
        assert not truncated and it.essence in text
    assert items[2].essence not in text and "cut this note" not in text


def test_order_carried_then_salience_then_longer_term():
    a = item("a", 100, salience=0.9, term="tail")
    b = item("b", 100, salience=0.2, carried=True, term="x")
    c = item("c", 100, salience=0.5, term="| tail -n")
    d = item("d", 100, salience=0.5, term="| tail")
    e = item("e", 100, salience=0.2, carried=True, term="npm run")
    assert names(order([a, b, c, d, e])) == ["e", "b", "a", "c", "d"]


def test_priority_decides_who_fits():
    low_carried = item("carried", 1200, salience=0.1, carried=True)
    high = item("high", 1200, salience=0.9)
    mid_long = item("midlong", 1200, salience=0.5, term="npm run build | tail")
    mid_short = item("midshort", 1200, salience=0.5, term="tail")
    delivered, skipped, text = pack([mid_short, mid_long, high, low_carried], 4000, "bash")
    assert names(delivered) == ["carried", "high", "midlong"]
    assert names(skipped) == ["midshort"]
    assert text.index("carried over from an earlier action") < text.index("◆ high")


def test_oversize_note_is_cut_last_with_mark_and_path_and_never_pushes_out_fitting_notes():
    big = item("big", 8401, salience=1.0, carried=True, path="runbooks/big.md")
    small = [item(f"s{i}", 600) for i in range(3)]
    delivered, skipped, text = pack([big] + small, 4000, "bash")
    assert names(delivered) == ["s0", "s1", "s2", "big"]
    assert skipped == []
    assert len(text) <= 4000
    it, block, truncated = delivered[-1]
    assert truncated and it is big
    assert "/store/runbooks/big.md" in block and "geode cut this note" in block
    assert " of 8401 characters" in block
    assert text.endswith(block)
    for it, _block, truncated in delivered[:-1]:
        assert not truncated and it.essence in text


def test_oversize_note_without_room_left_is_skipped_not_forced_in():
    big = item("big", 9000)
    small = [item(f"s{i}", 1200) for i in range(3)]
    delivered, skipped, text = pack([big] + small, 4000, "bash")
    assert names(delivered) == ["s0", "s1", "s2"] and names(skipped) == ["big"]
    assert len(text) <= 4000


def test_oversize_note_alone_is_cut_to_the_budget():
    delivered, skipped, text = pack([item("big", 20000)], 4000, "bash")
    assert len(delivered) == 1 and delivered[0][2] is True
    assert 3500 < len(text) <= 4000


def test_nothing_to_pack():
    assert pack([], 4000, "bash") == ([], [], "")


def test_boot_cut_marks_the_cut():
    long = item("boot", 1000, path="boot.md")
    text, cut = cut_boot(long, 300)
    assert cut and text.startswith(long.essence[:290]) and "[cut at 300 of 1000 characters" in text
    assert "/store/boot.md" in text
    assert cut_boot(item("short", 200), 300) == (item("short", 200).essence, False)


_items = st.lists(
    st.builds(
        lambda i, size, sal, carried, term: item(f"n{i}", size, salience=sal, carried=carried, term=term),
        st.integers(0, 10**6),
        st.integers(1, 9000),
        st.sampled_from([0.0, 0.2, 0.5, 0.9, 1.0]),
        st.booleans(),
        st.sampled_from(["| tail", "tail", "npm run build", "x"]),
    ),
    max_size=8,
    unique_by=lambda it: it.name,
)


@settings(max_examples=300, deadline=None)
@given(_items, st.integers(200, 10000))
def test_pack_properties(items, budget):
    delivered, skipped, text = pack(items, budget, "bash")
    head = header("bash")
    assert len(text) <= budget
    if delivered:
        assert text == head + "".join(b for _i, b, _t in delivered)
    else:
        assert text == ""
    # every item is either delivered or skipped, exactly once
    assert sorted(names(delivered) + names(skipped)) == sorted(it.name for it in items)
    whole = [(it, b) for it, b, t in delivered if not t]
    cut = [(it, b) for it, b, t in delivered if t]
    for it, b in whole:
        assert b == render(it, "bash")
    for it, b in cut:
        assert len(head) + len(render(it, "bash")) > budget  # only a note too big for any budget is cut
        assert it.abs_path in b and "geode cut this note" in b
    assert len(cut) <= 1
    if cut:
        assert delivered[-1][2] is True  # the cut note comes last
    # oversize notes never push out notes that fit: the whole notes are those packed without them
    fitting = [it for it in items if len(head) + len(render(it, "bash")) <= budget]
    alone = pack(fitting, budget, "bash")[0]
    assert [it.name for it, _b in whole] == names(alone)
