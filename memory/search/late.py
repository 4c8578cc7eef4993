"""Late interaction: MaxSim between a query's and a candidate's token vectors.

The token vectors are the embedding model's own (``EMBEDDING_MODEL_DIR``:
its ONNX graph's ``last_hidden_state``, each token's vector scaled to unit
length, padding and the special tokens left out), so no other weights are
needed.  MaxSim(q, d) is the mean over the query's tokens of the best
cosine with any of the candidate's tokens.  The engine's late-interaction
stage (``memory.search.engine``) adds ``weight`` times each candidate's
MaxSim, scaled over the candidates, to its fused score.

The model is loaded once per process beside the embedder's (the embedder
pools inside fastembed and keeps no token vectors); a directory without a
usable model makes the stage fail with the reason, and the search then
keeps its order.
"""

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings

# The stage re-scores this many of the best fused candidates.
LATE_DEPTH = 50
# Tokens of a candidate read (a query keeps up to the model's limit): the
# cost grows with the length, and a memory's first sentences carry it.
DOCUMENT_TOKENS = 128
QUERY_TOKENS = 64
BATCH = 25


class LateFailed(Exception):
    """No token vectors (the message says why)."""


class TokenEncoder:
    """The embedding model's graph and tokenizer, giving token vectors."""

    def __init__(self, model_dir: Path) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        graph = model_dir / "model.onnx"
        tokenizer_file = model_dir / "tokenizer.json"
        if not graph.is_file() or not tokenizer_file.is_file():
            raise LateFailed(f"no model.onnx and tokenizer.json in {model_dir}")
        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.no_padding()
        self.special = {
            self.tokenizer.token_to_id(t)
            for t in ("[CLS]", "[SEP]", "[PAD]")
            if self.tokenizer.token_to_id(t) is not None
        }
        options = ort.SessionOptions()
        if settings.EMBEDDING_THREADS:
            options.intra_op_num_threads = settings.EMBEDDING_THREADS
            options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(
            str(graph), options, providers=["CPUExecutionProvider"]
        )
        self.inputs = {i.name for i in self.session.get_inputs()}

    def vectors(self, texts: Sequence[str], *, max_tokens: int) -> list[np.ndarray]:
        """Each text's token vectors ``[tokens, hidden]``, unit length."""
        self.tokenizer.enable_truncation(max_length=max_tokens)
        encoded = self.tokenizer.encode_batch(list(texts))
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i].ids))
        out: list[Any] = [None] * len(encoded)
        for start in range(0, len(order), BATCH):
            chosen = order[start : start + BATCH]
            batch = [encoded[i] for i in chosen]
            for i, vecs in zip(chosen, self._batch(batch), strict=True):
                out[i] = vecs
        return out

    def _batch(self, encoded: list[Any]) -> list[np.ndarray]:
        width = max(len(e.ids) for e in encoded)
        ids = np.zeros((len(encoded), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, e in enumerate(encoded):
            ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = np.asarray(self.session.run(None, feed)[0], dtype=np.float32)
        found = []
        for row, e in enumerate(encoded):
            keep = [j for j, t in enumerate(e.ids) if t not in self.special]
            vecs = hidden[row, keep] if keep else hidden[row, : len(e.ids)]
            norms = np.linalg.norm(vecs, axis=1, keepdims=True)
            found.append(vecs / np.where(norms == 0, 1.0, norms))
        return found


def maxsim(query: np.ndarray, document: np.ndarray) -> float:
    """Mean over the query's tokens of the best cosine with the document's."""
    return float((query @ document.T).max(axis=1).mean())


_lock = threading.Lock()
_encoders: dict[str, TokenEncoder | str] = {}


def token_encoder() -> TokenEncoder:
    """The process-wide encoder of ``EMBEDDING_MODEL_DIR`` (a failed load
    is remembered with its reason and raised as ``LateFailed``)."""
    model_dir = settings.EMBEDDING_MODEL_DIR
    if not model_dir:
        raise LateFailed("no embedding model configured (PATTERN_EMBEDDING_MODEL_DIR)")
    found = _encoders.get(model_dir)
    if found is None:
        with _lock:
            found = _encoders.get(model_dir)
            if found is None:
                try:
                    found = TokenEncoder(Path(model_dir))
                except Exception as exc:  # a broken model must not break search
                    found = f"token vectors unavailable: {exc}"
                _encoders[model_dir] = found
    if isinstance(found, str):
        raise LateFailed(found)
    return found


@dataclass(frozen=True)
class LateInteraction:
    """The late-interaction stage of a search: its share of the score and
    how many of the best fused candidates it re-scores."""

    weight: float
    depth: int = LATE_DEPTH

    def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        """MaxSim of each document against ``query``."""
        encoder = token_encoder()
        (q,) = encoder.vectors([query], max_tokens=QUERY_TOKENS)
        docs = encoder.vectors(documents, max_tokens=DOCUMENT_TOKENS)
        return [maxsim(q, d) for d in docs]

    def describe(self) -> str:
        return (
            f"MaxSim of the embedding model's token vectors, {self.weight:g}"
            f" of the score; top {self.depth} candidates"
        )
