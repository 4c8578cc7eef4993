"""Re-rank models: the backends the search's re-rank stage asks to order
the best fused candidates.

Each backend scores ``documents`` against ``query`` (higher: more
relevant) or raises ``RerankFailed`` with the reason; the engine then keeps
the fusion order and says why (``memory.search.engine``).

- ``onnx``: a cross-encoder exported to ONNX (``input_ids``,
  ``attention_mask``, optionally ``token_type_ids`` in; one logit per pair
  out) with its ``tokenizer.json``, from ``RERANKER_MODEL_DIR``; run in this
  process by onnxruntime, ``RERANKER_BATCH`` pairs at a time.
- ``http``: ``POST <RERANKER_URL>/v1/rerank`` with ``query``, ``documents``
  and ``top_n``, answered ``{"results": [{"index", "relevance_score"}]}``
  (or text-embeddings-inference's bare ``[{"index", "score"}]``).
- ``llm``: the configured chat model, asked for the order of the numbered
  candidates as JSON (``activity.llm.client``; a wrong answer is asked
  again ``LLM_JSON_RETRIES`` times).
"""

import json
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx
import numpy as np
from django.conf import settings

RERANK_BACKENDS: tuple[str, ...] = ("onnx", "http", "llm")

# Characters of a candidate a backend reads: a cross-encoder truncates to
# its token limit anyway, and a remote backend need not receive more.
DOCUMENT_CHARS = 2000
LLM_DOCUMENT_CHARS = 600
MAX_TOKENS = 512  # BERT's position limit, the usual cross-encoder's


class RerankFailed(Exception):
    """The backend gave no usable order (the message says why)."""


class Reranker(Protocol):
    backend: str

    def describe(self) -> str: ...

    def scores(self, query: str, documents: Sequence[str]) -> list[float]: ...


@dataclass(frozen=True)
class RerankStage:
    """The re-rank stage of one search: the model and how many of the
    best fused candidates it orders."""

    reranker: Reranker
    depth: int = 50

    def describe(self) -> str:
        return f"{self.reranker.describe()}; top {self.depth} candidates"


def _finite(values: Sequence[Any], count: int) -> list[float]:
    if len(values) != count:
        raise RerankFailed(f"{len(values)} scores for {count} candidates")
    out = [float(v) for v in values]
    if not all(math.isfinite(v) for v in out):
        raise RerankFailed("a score that is not a finite number")
    return out


# --- Local cross-encoder ----------------------------------------------------


class OnnxCrossEncoder:
    """A cross-encoder ONNX export and its tokenizer, loaded from a directory."""

    def __init__(self, model_dir: Path, *, batch: int, threads: int) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        graphs = sorted(model_dir.glob("*.onnx")) or sorted(
            model_dir.glob("onnx/*.onnx")
        )
        if not graphs:
            raise RerankFailed(f"no ONNX model in {model_dir}")
        tokenizer_file = model_dir / "tokenizer.json"
        if not tokenizer_file.is_file():
            raise RerankFailed(f"no tokenizer.json in {model_dir}")
        self.model_dir = model_dir
        self.batch = max(1, batch)
        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.enable_truncation(max_length=_max_tokens(model_dir))
        # Each batch is padded here, to its own longest pair.
        self.tokenizer.no_padding()
        self.pad_id = self.tokenizer.token_to_id("[PAD]") or 0
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(
            str(graphs[0]), options, providers=["CPUExecutionProvider"]
        )
        self.inputs = {i.name for i in self.session.get_inputs()}
        missing = {"input_ids", "attention_mask"} - self.inputs
        if missing:
            raise RerankFailed(f"the model takes no {', '.join(sorted(missing))}")

    def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        """One logit a document; the pairs are batched by length, so a long
        document pads only the batch of the other long ones."""
        deadline = time.monotonic() + settings.RERANKER_TIMEOUT
        encoded = self.tokenizer.encode_batch(
            [(query, doc[:DOCUMENT_CHARS]) for doc in documents]
        )
        by_length = sorted(range(len(encoded)), key=lambda i: len(encoded[i].ids))
        out = np.zeros(len(encoded), dtype=np.float32)
        for start in range(0, len(by_length), self.batch):
            if start and time.monotonic() > deadline:
                raise RerankFailed(
                    f"took longer than {settings.RERANKER_TIMEOUT:g} s"
                    f" ({start} of {len(documents)} scored)"
                )
            chosen = by_length[start : start + self.batch]
            out[chosen] = self._score_batch([encoded[i] for i in chosen])
        return _finite(out.tolist(), len(documents))

    def _score_batch(self, encoded: list[Any]) -> np.ndarray:
        width = max(len(e.ids) for e in encoded)
        shape = (len(encoded), width)
        ids = np.full(shape, self.pad_id, dtype=np.int64)
        mask = np.zeros(shape, dtype=np.int64)
        types = np.zeros(shape, dtype=np.int64)
        for row, e in enumerate(encoded):
            ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = 1
            types[row, : len(e.ids)] = e.type_ids
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = types
        logits = np.asarray(self.session.run(None, feed)[0], dtype=np.float32)
        # One logit per pair ([b] or [b, 1]); a two-class head: the last
        # class is "relevant".
        if logits.ndim == 2 and logits.shape[1] > 1:
            logits = logits[:, -1]
        return logits.reshape(len(encoded))


def _max_tokens(model_dir: Path) -> int:
    """The tokenizer's own limit when it states one, at most ``MAX_TOKENS``."""
    config = model_dir / "tokenizer_config.json"
    if config.is_file():
        limit = json.loads(config.read_text()).get("model_max_length")
        if isinstance(limit, int) and 0 < limit < MAX_TOKENS:
            return limit
    return MAX_TOKENS


_onnx_lock = threading.Lock()
_onnx_models: dict[tuple[str, int, int], OnnxCrossEncoder | str] = {}


class LocalReranker:
    """The cross-encoder of ``RERANKER_MODEL_DIR``, loaded once per process
    on first use (a failed load is remembered with its reason)."""

    backend = "onnx"

    def describe(self) -> str:
        name = Path(settings.RERANKER_MODEL_DIR).name or "(no directory)"
        return f"cross-encoder {name} (ONNX, in this process)"

    def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        return self._model().scores(query, documents)

    def _model(self) -> OnnxCrossEncoder:
        model_dir = settings.RERANKER_MODEL_DIR
        if not model_dir:
            raise RerankFailed(
                "no cross-encoder configured (PATTERN_RERANKER_MODEL_DIR)"
            )
        key = (model_dir, settings.RERANKER_BATCH, settings.RERANKER_THREADS)
        found = _onnx_models.get(key)
        if found is None:
            with _onnx_lock:
                found = _onnx_models.get(key)
                if found is None:
                    found = _onnx_models[key] = _onnx_load(key)
        if isinstance(found, str):
            raise RerankFailed(found)
        return found


def _onnx_load(key: tuple[str, int, int]) -> OnnxCrossEncoder | str:
    model_dir, batch, threads = key
    path = Path(model_dir)
    if not path.is_dir():
        return f"cross-encoder directory {model_dir} does not exist"
    try:
        return OnnxCrossEncoder(path, batch=batch, threads=threads)
    except RerankFailed as exc:
        return f"cross-encoder in {model_dir}: {exc}"
    except Exception as exc:  # a broken model must not break search
        return f"cross-encoder in {model_dir} failed to load: {exc}"


def rerankers_reset() -> None:
    """Forget loaded cross-encoders and HTTP clients (tests, settings changes)."""
    with _onnx_lock:
        _onnx_models.clear()
        for client in _http_clients.values():
            client.close()
        _http_clients.clear()


# --- HTTP endpoint ----------------------------------------------------------


_http_clients: dict[tuple[str, str], httpx.Client] = {}


def rerank_url(base: str) -> str:
    """``base`` as the endpoint: as given when it names one (``.../rerank``),
    else with ``/v1/rerank`` added."""
    base = base.rstrip("/")
    if base.endswith("/rerank"):
        return base
    return f"{base}/rerank" if base.endswith("/v1") else f"{base}/v1/rerank"


class HttpReranker:
    """A ``POST /v1/rerank`` endpoint (``RERANKER_URL``)."""

    backend = "http"

    def describe(self) -> str:
        where = httpx.URL(settings.RERANKER_URL).host if settings.RERANKER_URL else ""
        return f"re-rank endpoint {where or '(no URL)'} (HTTP)"

    def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        if not settings.RERANKER_URL:
            raise RerankFailed("no re-rank endpoint configured (PATTERN_RERANKER_URL)")
        body: dict[str, Any] = {
            "query": query,
            "documents": [doc[:DOCUMENT_CHARS] for doc in documents],
            "top_n": len(documents),
        }
        if settings.RERANKER_MODEL:
            body["model"] = settings.RERANKER_MODEL
        try:
            response = self._client().post(
                rerank_url(settings.RERANKER_URL),
                json=body,
                timeout=settings.RERANKER_TIMEOUT,
            )
        except httpx.TimeoutException:
            raise RerankFailed(
                f"the endpoint did not answer within {settings.RERANKER_TIMEOUT:g} s"
            ) from None
        except httpx.HTTPError as exc:
            raise RerankFailed(f"the endpoint could not be reached: {exc}") from exc
        if response.status_code != 200:
            raise RerankFailed(f"the endpoint answered HTTP {response.status_code}")
        try:
            answer = response.json()
        except ValueError:
            raise RerankFailed("the endpoint's answer is not JSON") from None
        return http_scores(answer, len(documents))

    def _client(self) -> httpx.Client:
        key = (settings.RERANKER_URL, settings.RERANKER_API_KEY)
        client = _http_clients.get(key)
        if client is None:
            headers = {}
            if settings.RERANKER_API_KEY:
                headers["Authorization"] = f"Bearer {settings.RERANKER_API_KEY}"
            client = _http_clients.setdefault(key, httpx.Client(headers=headers))
        return client


def http_scores(answer: Any, count: int) -> list[float]:
    """Each document's score from a re-rank answer; a document the answer
    leaves out (``top_n`` honoured loosely) scores below every other."""
    results = answer.get("results") if isinstance(answer, dict) else answer
    if not isinstance(results, list):
        raise RerankFailed("the endpoint's answer has no results list")
    found: dict[int, float] = {}
    for item in results:
        index = item.get("index") if isinstance(item, dict) else None
        score = (
            item.get("relevance_score", item.get("score"))
            if index is not None
            else None
        )
        if (
            not isinstance(index, int)
            or isinstance(index, bool)
            or not 0 <= index < count
            or index in found
            or not isinstance(score, int | float)
            or not math.isfinite(score)
        ):
            raise RerankFailed(f"the endpoint's answer has a bad result: {item!r:.80}")
        found[index] = float(score)
    if not found:
        raise RerankFailed("the endpoint's answer has no results")
    floor = min(found.values()) - 1.0
    return [found.get(i, floor) for i in range(count)]


# --- The LLM, listwise ------------------------------------------------------

LLM_SYSTEM = (
    "You rank search results. Given a query and numbered passages, answer"
    ' with JSON only: {"order": [numbers]}, every passage number once, the'
    " passage that best answers the query first."
)


class LlmReranker:
    """The configured chat model, asked for the order of the candidates;
    its tokens are charged to ``constellation_id``'s budget."""

    backend = "llm"

    def __init__(self, *, constellation_id: int) -> None:
        self.constellation_id = constellation_id

    def describe(self) -> str:
        return f"the LLM {settings.LLM_MODEL or '(none configured)'}, listwise"

    def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        from activity.llm.client import LLMUnavailable, chat_client

        client = chat_client()
        if client is None:
            raise RerankFailed("no LLM configured (PATTERN_LLM_BASE_URL, _MODEL)")
        numbered = "\n\n".join(
            f"[{n}] {' '.join(doc[:LLM_DOCUMENT_CHARS].split())}"
            for n, doc in enumerate(documents, start=1)
        )
        messages = [
            {"role": "system", "content": LLM_SYSTEM},
            {"role": "user", "content": f"Query: {query}\n\nPassages:\n{numbered}"},
        ]
        try:
            order, _completion = client.complete_json(
                constellation_id=self.constellation_id,
                messages=messages,
                validate=lambda value: llm_order(value, len(documents)),
            )
        except LLMUnavailable as exc:
            raise RerankFailed(str(exc)) from exc
        # The named order first; passages the answer left out after them,
        # in the order they came.
        named = set(order)
        ranked = order + [i for i in range(len(documents)) if i not in named]
        scores = [0.0] * len(documents)
        for position, index in enumerate(ranked):
            scores[index] = float(len(documents) - position)
        return scores


def llm_order(value: Any, count: int) -> list[int]:
    """The 0-based order of an answer ``{"order": [1-based numbers]}``;
    ValueError (the client asks again) for any other shape."""
    order = value.get("order") if isinstance(value, dict) else value
    if not isinstance(order, list) or not order:
        raise ValueError('answer {"order": [passage numbers]}, best first')
    seen: list[int] = []
    for number in order:
        if isinstance(number, bool) or not isinstance(number, int):
            raise ValueError(f"{number!r} is not a passage number")
        if not 1 <= number <= count:
            raise ValueError(f"there is no passage {number}; they are 1 to {count}")
        if number - 1 in seen:
            raise ValueError(f"passage {number} is named twice")
        seen.append(number - 1)
    return seen


def reranker_for(backend: str, *, constellation_id: int) -> Reranker:
    """The backend named ``backend`` (one of ``RERANK_BACKENDS``)."""
    if backend == "onnx":
        return LocalReranker()
    if backend == "http":
        return HttpReranker()
    if backend == "llm":
        return LlmReranker(constellation_id=constellation_id)
    raise ValueError(f"unknown re-rank backend {backend!r}")
