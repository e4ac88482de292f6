"""GGUF fuzzing: mutated real and synthetic files, and files built from scratch, through the reader
(`read_gguf`), `strata inspect` and the engine's load. Each either succeeds or gives one clear error
(an EngineError whose one-line message names the file; `strata inspect` exits 1 with one line on
stderr): never another exception type, a hang, a huge allocation or a traceback.

Budgets (CI, 2 cores, about 50 s for the module): 250 mutated SmolLM2/synthetic files through the reader
and inspect (~15 s), 150 mutated synthetic files through the load (~10 s), 800 files from scratch (~5 s),
100 synthetic files with one metadata value of another type or range through inspect and load (~20 s);
each example has a deadline (5-15 s) and the module a 180 s timeout (a hang fails it). For a longer run:
STRATA_FUZZ_SCALE=20 pytest -s tests/engine/test_fuzz_gguf.py (-s prints what the reader answered).
Every file that once failed is kept under tests/engine/fuzz_cases/ and loaded by test_fuzz_cases.py.
"""
from __future__ import annotations

import collections
import contextlib
import io
import os
import resource
import tempfile
import time
import tracemalloc
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

from engine.errors import EngineError, ModelFileError
from engine.gguf_file import read_gguf
from tests.engine import gguf_mutate as gm

pytestmark = [pytest.mark.timeout(180)]

SCALE = float(os.environ.get("STRATA_FUZZ_SCALE", "1"))
OUTCOMES: collections.Counter = collections.Counter()   # the reader's answers (pytest -s prints them)
READ_PEAK_LIMIT = 96 << 20         # bytes the reader may allocate for any header here (the real one needs ~15 MB)


def budget(n: int, seconds: float, shrink: bool = True) -> settings:
    """n examples, each within `seconds`. Without shrink a failure is reported as found: shrinking
    examples that take 0.1-0.5 s each can take many minutes (a mutation recipe is short anyway)."""
    phases = [p for p in Phase if shrink or p not in (Phase.shrink, Phase.explain)]
    return settings(max_examples=max(1, int(n * SCALE)), deadline=timedelta(seconds=seconds), database=None,
                    suppress_health_check=list(HealthCheck), print_blob=True, phases=phases)


# ---------------------------------------------------------------- oracles

def assert_clean_error(e: BaseException, path: Path) -> None:
    msg = str(e)
    assert isinstance(e, EngineError), f"{type(e).__name__}: {msg}"
    assert msg and "\n" not in msg and len(msg) < 2000, f"not one short line: {msg!r}"
    if isinstance(e, ModelFileError):
        assert str(path) in msg, f"the message does not name the file: {msg!r}"


def check_read(path: Path, trace: bool = False):
    """read_gguf: a GGUFFile or ModelFileError. With trace, never more than READ_PEAK_LIMIT allocated on the
    way (tracemalloc: exact, but it makes reading a 49k-token vocabulary 15x slower; see max_rss_growth)."""
    if trace:
        tracemalloc.start()
    try:
        gf = read_gguf(path)
        OUTCOMES["ok"] += 1
        return gf
    except ModelFileError as e:
        assert_clean_error(e, path)
        why = e.problem.split(": ", 1)[-1] if e.problem.startswith("corrupt header at") else e.problem
        OUTCOMES[" ".join(why.split()[:3])] += 1
        return None
    finally:
        if trace:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            assert peak < READ_PEAK_LIMIT, f"the reader allocated {peak / 2**20:.0f} MiB"


@contextlib.contextmanager
def max_rss_growth(limit_mib: int = 512):
    """The process's peak RSS grows by less than `limit_mib` inside (cheap; catches huge allocations)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    yield
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown < limit_mib, f"peak memory grew by {grown:.0f} MiB"


def check_inspect(path: Path, json: bool = False) -> int:
    """`strata inspect`: exit 0 with output, or exit 1 with one line on stderr (no traceback)."""
    from app.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["inspect", str(path), *(["--json"] if json else [])])
    if rc == 0:
        assert out.getvalue() and not err.getvalue()
    else:
        lines = err.getvalue().splitlines()
        assert rc == 1 and len(lines) == 1 and lines[0].startswith("strata inspect: error: "), err.getvalue()
        assert str(path) in lines[0]
    return rc


def check_load(path: Path) -> bool:
    """load_model on CPU: a model whose first window runs, or one clean EngineError."""
    from engine.loader import load_model
    from engine.messages import EngineConfig

    try:
        m = load_model(EngineConfig(model=str(path), ctx=32, parallel=1))
    except EngineError as e:
        assert_clean_error(e, path)
        return False
    try:
        logits = m.pipeline.score([1, 2, 3])
        assert tuple(logits.shape) == (3, m.cfg.vocab_size)
    finally:
        m.pipeline.close()
    return True


# ---------------------------------------------------------------- seeds and mutations

@pytest.fixture(autouse=True)
def outcomes():
    OUTCOMES.clear()
    yield
    print("\nreader outcomes: " + ", ".join(f"{k} x{n}" for k, n in OUTCOMES.most_common()))


@pytest.fixture(scope="module")
def workdir():
    with tempfile.TemporaryDirectory(prefix="strata-fuzz-") as d:
        yield Path(d)


@pytest.fixture(scope="module", autouse=True)
def private_tokenizer_cache(workdir):
    """Mutated vocabularies must not fill the user's tokenizer cache."""
    import engine.tokenizer_build as tb

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tb, "default_cache_dir", lambda: workdir / "tokenizers")
        yield


@pytest.fixture(scope="module")
def seeds(smol_path, synthetic):
    """seed name -> (bytes to mutate, full size): SmolLM2's header (its 95 MB of tensor data become a hole
    in a sparse file) and the whole tiny synthetic files."""
    with open(smol_path, "rb") as f:
        smol = f.read(read_gguf(smol_path).data_offset)
    out = {"smol": (smol, smol_path.stat().st_size)}
    for arch in ("llama", "qwen3moe", "gemma3"):
        data = Path(synthetic(arch, mtp=1 if arch == "llama" else 0)).read_bytes()
        out[f"synthetic:{arch}"] = (data, len(data))
    return out


@pytest.fixture(scope="module")
def layouts(seeds):
    return {name: gm.walk(data) for name, (data, _) in seeds.items()}


INTERESTING = [0, 1, 2, 3, 7, 8, 31, 32, 33, 255, 256, 4096, 2**16, 2**31 - 1, 2**31, 2**32 - 1, 2**32,
               2**60, 2**63 - 1, 2**63, 2**64 - 1]


def mutations(layout: gm.Layout, size: int, header_only: bool):
    """1-3 mutations: a named field set to an interesting, small or random value, a flipped byte in the
    header, or a truncation. Fields are picked by kind first (a synthetic file has ~10x more tensor
    fields than metadata values): metadata values, structure (counts, lengths, types), tensor infos."""
    kinds = {}
    for f in layout.fields:
        if f.name == "header.magic":
            continue                   # flips reach it; setting it only ever gives "not a GGUF file"
        kind = ("tensor" if f.name.startswith("tensor:") else
                "kv-value" if f.name.startswith("kv:") and (":value" in f.name or "[" in f.name) else "structure")
        kinds.setdefault(kind, []).append(f.name)
    value = st.one_of(st.sampled_from(INTERESTING), st.integers(0, 300), st.integers(0, 2**64 - 1),
                      st.floats(allow_nan=True, allow_infinity=True, width=32))
    field = st.sampled_from(sorted(kinds)).flatmap(lambda k: st.sampled_from(kinds[k]))
    set_field = st.tuples(st.just("set"), field, value).map(list)
    flip = st.tuples(st.just("flip"), st.integers(0, layout.header_end - 1), st.integers(1, 255)).map(list)
    cut_end = layout.header_end + 64 if header_only else size
    cut = st.one_of(st.integers(0, 64), st.integers(64, layout.header_end), st.integers(layout.header_end, cut_end))
    truncate = st.tuples(st.just("truncate"), cut).map(list)
    one = st.one_of(set_field, set_field, set_field, flip, truncate)
    return st.lists(one, min_size=1, max_size=3)


def materialize(workdir: Path, seeds, recipe: dict, name: str = "case.gguf") -> Path:
    data, size = gm.load_recipe(recipe, seeds)
    path = workdir / name
    gm.write_sparse(path, data, size)
    return path


@st.composite
def recipes(draw, seed_names, layouts, seeds, header_only=False):
    seed = draw(st.sampled_from(seed_names))
    return {"seed": seed, "mutations": draw(mutations(layouts[seed], seeds[seed][1], header_only))}


# ---------------------------------------------------------------- the fuzz tests

def test_fuzz_read_and_inspect_mutated(seeds, layouts, workdir):
    """Reader and `strata inspect` on mutated SmolLM2 headers and synthetic files."""
    names = sorted(seeds)

    @budget(250, 5, shrink=False)
    @given(st.data())
    def run(data):
        recipe = data.draw(recipes(names, layouts, seeds), label="recipe")
        path = materialize(workdir, seeds, recipe)
        with max_rss_growth():
            check_read(path)
            check_inspect(path)

    run()


def test_fuzz_load_mutated_synthetic(seeds, layouts, workdir):
    """The engine's load (and its first window) on mutated tiny synthetic files."""
    names = [n for n in seeds if n.startswith("synthetic:")]

    loaded = []

    @budget(150, 15, shrink=False)
    @given(st.data())
    def run(data):
        recipe = data.draw(recipes(names, layouts, seeds, header_only=True), label="recipe")
        with max_rss_growth():
            loaded.append(check_load(materialize(workdir, seeds, recipe)))

    run()
    print(f"\nload fuzz: {sum(loaded)} of {len(loaded)} mutated files loaded and ran a window")


# Files from scratch: any key/value types, general.alignment of any type and value, tensor infos with
# any dims, quant type ids and offsets, a data section of any length.
KEYS = ["general.architecture", "general.alignment", "general.name", "llama.block_count",
        "llama.embedding_length", "llama.attention.head_count", "llama.attention.head_count_kv",
        "llama.context_length", "llama.rope.dimension_count", "tokenizer.ggml.model", "tokenizer.ggml.tokens",
        "tokenizer.ggml.bos_token_id", "tokenizer.chat_template"]
TENSORS = ["token_embd.weight", "output_norm.weight", "blk.0.attn_q.weight", "blk.0.attn_norm.weight",
           "blk.x.ffn_up.weight", "blk..weight", "blk.99999999999999999999.attn_k.weight", ""]


def _values(vtype: int):
    if vtype == gm.STRING:
        return st.one_of(st.sampled_from(["llama", "qwen3", "gemma3", "gpt2", ""]), st.text(max_size=20))
    if vtype in (gm.F32, gm.F64):
        return st.floats(width=32 if vtype == gm.F32 else 64)
    if vtype == gm.BOOL:
        return st.booleans()
    if vtype == gm.ARRAY:
        return st.one_of(st.tuples(st.just(gm.U32), st.lists(st.integers(0, 2**32 - 1), max_size=4)),
                         st.tuples(st.just(gm.STRING), st.lists(st.text(max_size=5), max_size=4)),
                         st.tuples(st.just(gm.ARRAY), st.lists(st.tuples(st.just(gm.U8), st.lists(
                             st.integers(0, 255), max_size=3)), max_size=2)),
                         st.tuples(st.integers(0, 2**32 - 1), st.just([])),
                         st.tuples(st.sampled_from([gm.STRING, gm.U8, gm.U64, gm.ARRAY]), st.just([]),   # a count
                                   st.sampled_from([2**60, 2**63, 2**64 - 1, 2**32, 10**6])))        # it lacks
    if vtype in gm.SCALAR_FMT:
        bits = 8 * gm.SCALAR_SIZE[vtype]
        signed = vtype in (gm.I8, gm.I16, gm.I32, gm.I64)
        lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
        return st.one_of(st.sampled_from([v for v in (0, 1, 32, 33, 64, hi, lo) if lo <= v <= hi]),
                         st.integers(max(lo, -2), min(hi, 16)), st.integers(lo, hi))
    return st.just(None)


@st.composite
def kv_entries(draw):
    key = draw(st.one_of(st.sampled_from(KEYS), st.text(max_size=12)))
    valid = draw(st.sampled_from([True] * 9 + [False]))
    vtype = draw(st.integers(0, 12) if valid else st.integers(13, 2**32 - 1))
    return key, vtype, draw(_values(vtype))


PLAUSIBLE_TENSOR = st.tuples(
    st.sampled_from(TENSORS),
    st.lists(st.sampled_from([1, 2, 32, 64, 256]), min_size=1, max_size=3).map(lambda d: [32 * d[0], *d[1:]]),
    st.sampled_from([0, 1, 8, 12, 30]),                       # F32, F16, Q8_0, Q4_K, BF16
    st.integers(0, 64).map(lambda k: 32 * k))
ANY_TENSOR = st.tuples(
    st.sampled_from(TENSORS),
    st.lists(st.one_of(st.sampled_from([0, 1, 2, 32, 256, 2**32, 2**62]), st.integers(0, 2**64 - 1)), max_size=5),
    st.one_of(st.sampled_from([0, 1, 2, 8, 12, 14, 30, 39, 4]), st.integers(0, 2**32 - 1)),
    st.one_of(st.sampled_from([0, 1, 32, 64, 2**63]), st.integers(0, 2**64 - 1)))


@st.composite
def scratch_files(draw):
    kvs = draw(st.lists(kv_entries(), max_size=6))
    if draw(st.booleans()):        # often a plausible alignment, sometimes a bad one
        a = draw(st.one_of(st.sampled_from([1, 8, 16, 32, 64, 0, 3, 48, 2**31]), st.integers(0, 2**32 - 1)))
        vtype = draw(st.sampled_from([gm.U32, gm.U32, gm.U64, gm.I32, gm.STRING]))
        kvs.insert(draw(st.integers(0, len(kvs))), ("general.alignment", vtype, str(a) if vtype == gm.STRING else a))
        alignment = a if 0 < a <= 1 << 20 else 32
    else:
        alignment = 32
    tensors = draw(st.lists(st.one_of(PLAUSIBLE_TENSOR, PLAUSIBLE_TENSOR, ANY_TENSOR), max_size=4))
    counts = draw(st.sampled_from([None] * 6 + ["tensors", "kv"]))
    big = draw(st.sampled_from([2**60, 2**64 - 1, 10**6, 10**6 + 1, 1000]))
    return gm.build(kvs, tensors, draw(st.integers(0, 1 << 16)),
                    version=draw(st.sampled_from([3] * 8 + [2, 1, 4, 3 << 24])), alignment=alignment,
                    n_tensors=big if counts == "tensors" else None, n_kv=big if counts == "kv" else None)


def test_fuzz_read_and_inspect_scratch(workdir):
    """Small files built from scratch: alignment, offsets, sizes, types, counts."""
    @budget(800, 5)
    @given(scratch_files())
    def run(data):
        path = workdir / "scratch.gguf"
        path.write_bytes(data)
        t0 = time.monotonic()
        check_read(path, trace=True)
        check_inspect(path, json=True)
        assert time.monotonic() - t0 < 5

    run()


@st.composite
def metadata_recipes(draw, names, layouts):
    """One metadata entry of a synthetic file replaced by a value of any type (or dropped, or added)."""
    seed = draw(st.sampled_from(names))
    keys = sorted(layouts[seed].kv_spans) + ["general.alignment", "tokenizer.chat_template"]
    key = draw(st.sampled_from(keys))
    if draw(st.sampled_from([False] * 9 + [True])):
        return {"seed": seed, "mutations": [["kv", key, None]]}
    vtype = draw(st.sampled_from([gm.U32, gm.U32, gm.I32, gm.U64, gm.F32, gm.BOOL, gm.STRING, gm.ARRAY, gm.U8,
                                  gm.F64, gm.I64, 13]))
    value = draw(_values(vtype))
    return {"seed": seed, "mutations": [["kv", key, vtype, list(value) if isinstance(value, tuple) else value]]}


def test_fuzz_metadata_types(seeds, layouts, workdir):
    """Metadata of the wrong type, range or presence, through `strata inspect` and the engine's load."""
    names = [n for n in seeds if n.startswith("synthetic:")]
    loaded = []

    @budget(100, 15, shrink=False)
    @given(st.data())
    def run(data):
        recipe = data.draw(metadata_recipes(names, layouts), label="recipe")
        path = materialize(workdir, seeds, recipe)
        with max_rss_growth():
            if check_read(path) is not None and check_inspect(path) == 0:
                loaded.append(check_load(path))

    run()
    print(f"\nmetadata fuzz: {sum(loaded)} of {len(loaded)} files that inspect accepts loaded and ran a window")
