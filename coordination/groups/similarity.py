"""Message-to-expertise similarity by embedding, for capability selection.

Uses the process's embedding model (``memory.search.embedder``) when it is
available; returns None otherwise, and callers match words instead.
Expertise texts change rarely, so their vectors are kept per process.
"""

import threading
from functools import lru_cache

import numpy as np

from memory.search.embedder import embed_texts, embedding_status

_lock = threading.Lock()


@lru_cache(maxsize=1024)
def _expertise_vector(text: str) -> np.ndarray | None:
    vectors = embed_texts([text])
    return vectors[0] if vectors else None


def expertise_similarity(message: str, expertise: list[str]) -> list[float] | None:
    """Cosine similarity of ``message`` to each expertise text, or None."""
    if not embedding_status().available:
        return None
    query = embed_texts([message])
    if not query:
        return None
    with _lock:
        vectors = [_expertise_vector(text) if text else None for text in expertise]
    # Vectors are unit length: the dot product is the cosine.
    return [float(query[0] @ v) if v is not None else -1.0 for v in vectors]
