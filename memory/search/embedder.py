"""The embedding model: found fast, loaded once per process, never fetched.

The model is a local directory (``PATTERN_EMBEDDING_MODEL_DIR``) holding an
ONNX export fastembed can load with ``specific_model_path``.  Nothing here
touches the network: with no usable directory the model is *unavailable*
at once (with the reason), and search degrades to keywords instead of
waiting on fastembed's hub retries.
"""

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from django.conf import settings

if TYPE_CHECKING:
    from fastembed import TextEmbedding

_lock = threading.Lock()
_model: "TextEmbedding | None" = None
_load_error: str | None = None

# The vectors of the latest queries, by text: a query asked again (an
# agent repeating a search, the same question in several domains or
# settings) skips the model, whose run is most of a search's time.  The
# model's vector for a text does not change while it is loaded.
QUERY_CACHE_MAX = 512
_queries: OrderedDict[str, np.ndarray] = OrderedDict()


@dataclass(frozen=True)
class EmbeddingStatus:
    available: bool
    model: str
    dim: int
    reason: str


def embedding_status() -> EmbeddingStatus:
    """Whether embeddings can be made in this process, without loading."""
    model_name, dim = settings.EMBEDDING_MODEL, settings.EMBEDDING_DIM
    if _load_error is not None:
        return EmbeddingStatus(False, model_name, dim, _load_error)
    if _model is not None:  # loaded: no need to look at the directory again
        return EmbeddingStatus(True, model_name, dim, "loaded")
    model_dir = settings.EMBEDDING_MODEL_DIR
    if not model_dir:
        return EmbeddingStatus(
            False,
            model_name,
            dim,
            "no embedding model configured (set PATTERN_EMBEDDING_MODEL_DIR);"
            " search uses keywords only",
        )
    path = Path(model_dir)
    if not path.is_dir() or not any(path.glob("*.onnx")):
        return EmbeddingStatus(
            False,
            model_name,
            dim,
            f"embedding model directory {model_dir} has no ONNX model;"
            " search uses keywords only",
        )
    return EmbeddingStatus(True, model_name, dim, "ready (loads on first use)")


def embedding_model() -> "TextEmbedding | None":
    """The process-wide model, loaded on first call; None when unavailable."""
    global _model, _load_error
    if _model is not None:
        return _model
    if not embedding_status().available:
        return None
    with _lock:
        if _model is None and _load_error is None:
            os.environ["HF_HUB_OFFLINE"] = "1"
            from fastembed import TextEmbedding

            try:
                _model = TextEmbedding(
                    settings.EMBEDDING_MODEL,
                    specific_model_path=settings.EMBEDDING_MODEL_DIR,
                    threads=settings.EMBEDDING_THREADS or None,
                )
            except Exception as exc:  # a broken model must not break search
                _load_error = f"embedding model failed to load: {exc}"
    return _model


def embed_texts(texts: list[str]) -> list[np.ndarray] | None:
    """Unit-length float32 vectors for ``texts``, or None with no model."""
    model = embedding_model()
    if model is None:
        return None
    return [np.asarray(v, dtype=np.float32) for v in model.embed(texts, batch_size=32)]


def embed_query(text: str) -> np.ndarray | None:
    """The vector of one search query (web process), or None with no model;
    read-only, shared by the searches of the same text."""
    with _lock:
        known = _queries.get(text)
        if known is not None:
            _queries.move_to_end(text)
            return known
    vectors = embed_texts([text])
    if not vectors:
        return None
    vector = vectors[0]
    vector.setflags(write=False)
    with _lock:
        _queries[text] = vector
        if len(_queries) > QUERY_CACHE_MAX:
            _queries.popitem(last=False)
    return vector


def embedding_reset() -> None:
    """Forget the loaded model and any load error (tests, settings changes)."""
    global _model, _load_error
    with _lock:
        _model = None
        _load_error = None
        _queries.clear()
