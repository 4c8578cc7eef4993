"""The re-rank stage with each backend: a cross-encoder graph built here
(scored through the real loading code), a re-rank server on loopback and
the fake LLM server.  Each re-orders the fused candidates as the backend
says, and whatever goes wrong leaves the fusion order and says why."""

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memory.longterm.search import memory_search
from memory.longterm.services import archival_entry_create, retrieval_config_update
from memory.search.engine import Hit, _model_reranked
from memory.search.rerank import (
    LocalReranker,
    RerankFailed,
    RerankStage,
    http_scores,
    llm_order,
    rerank_url,
    rerankers_reset,
)
from pattern_site.kernel.actors import Actor
from tests.fake_llm import FakeLLM, completion

QUERY = "tomato garden harvest"
# Fusion (BM25) puts the short, exact entry first; the entries that say
# the query's words most often come later.
ENTRIES = [
    "tomato garden harvest",
    "tomato harvest notes from the garden shed and the long walk back home",
    "garden harvest tomato tomato garden harvest tomato with friends over"
    " a long weekend of cooking soup and sauce",
    "harvest of tomato from the garden",
]
WORDS = sorted(
    {w for text in [QUERY, *ENTRIES] for w in re.findall(r"\w+", text.lower())}
)


@pytest.fixture(autouse=True)
def _fresh_backends() -> Iterator[None]:
    rerankers_reset()
    yield
    rerankers_reset()


@pytest.fixture
def entries(agent: Any) -> dict[int, str]:
    return {
        archival_entry_create(agent=agent, content=text).pk: text for text in ENTRIES
    }


def _search(agent: Any, reranker: str = "off", depth: int = 50) -> Any:
    retrieval_config_update(
        constellation=agent.constellation, reranker=reranker, reranker_depth=depth
    )
    return memory_search(
        actor=Actor.for_agent(agent), query=QUERY, mode="fts", limit=10
    )


def _order(result: Any) -> list[str]:
    return [hit.row.content for _kind, hit in result.hits]


def _stage(result: Any) -> Any:
    return next(s for s in result.stages if s.name == "re-rank model")


def _overlap(text: str) -> int:
    """What the test cross-encoder scores: passage words found in the query."""
    query = set(QUERY.split())
    return sum(1 for w in re.findall(r"\w+", text.lower()) if w in query)


# --- A cross-encoder graph ---------------------------------------------------


def write_cross_encoder(path: Path) -> Path:
    """A BERT-style cross-encoder export in ``path``: a WordPiece tokenizer
    (``tokenizer.json``) and a graph taking ``input_ids``, ``attention_mask``
    and ``token_type_ids`` and giving one logit a pair: how many of the
    passage's tokens (type 1) are also in the query (type 0)."""
    import onnx
    from onnx import TensorProto, helper
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    path.mkdir(parents=True, exist_ok=True)
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *WORDS])}
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    tokenizer.save(str(path / "tokenizer.json"))

    def const(name: str, value: Any) -> Any:
        return helper.make_tensor(name, TensorProto.INT64, [len(value)], value)

    nodes = [
        helper.make_node("Cast", ["token_type_ids"], ["tt"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["attention_mask"], ["am"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["tt", "am"], ["passage"]),
        helper.make_node("Sub", ["am", "passage"], ["query"]),
        helper.make_node("Unsqueeze", ["input_ids", "ax2"], ["rows"]),
        helper.make_node("Unsqueeze", ["input_ids", "ax1"], ["cols"]),
        helper.make_node("Equal", ["rows", "cols"], ["same"]),
        helper.make_node("Cast", ["same"], ["samef"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["query", "ax1"], ["query_cols"]),
        helper.make_node("Mul", ["samef", "query_cols"], ["in_query"]),
        helper.make_node("ReduceMax", ["in_query"], ["found"], axes=[2], keepdims=0),
        helper.make_node("Mul", ["found", "passage"], ["found_passage"]),
        helper.make_node("ReduceSum", ["found_passage", "ax1"], ["logits"], keepdims=1),
    ]
    inputs = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "seq"])
        for name in ("input_ids", "attention_mask", "token_type_ids")
    ]
    output = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])
    graph = helper.make_graph(
        nodes, "overlap", inputs, [output], [const("ax1", [1]), const("ax2", [2])]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save_model(model, str(path / "model.onnx"))
    return path


@pytest.fixture
def cross_encoder(tmp_path: Path, settings: Any) -> Path:
    settings.RERANKER_MODEL_DIR = str(write_cross_encoder(tmp_path / "ce"))
    return tmp_path / "ce"


def test_the_cross_encoder_scores_pairs_through_the_loading_code(
    cross_encoder: Path, settings: Any
):
    settings.RERANKER_BATCH = 3  # more documents than a batch
    scores = LocalReranker().scores(QUERY, ENTRIES)
    # The passage's closing [SEP] matches the query's: one more each.
    assert scores == [_overlap(text) + 1 for text in ENTRIES]


def test_the_cross_encoder_reorders_the_fused_candidates(
    agent: Any, entries: Any, cross_encoder: Path
):
    fused = _order(_search(agent))
    result = _search(agent, "onnx")
    # The cross-encoder's order (the test graph scores word overlap).  On
    # SQLite the fused order differs from it, so this proves the stage
    # reordered; PostgreSQL's fusion happens to rank these rows in that
    # order already (the hit-level test below reorders on any database).
    assert _order(result) == sorted(fused, key=lambda t: -_overlap(t))
    assert result.degraded == ""
    scores = [hit.score for _kind, hit in result.hits]
    assert scores == sorted(scores, reverse=True)  # merges on the fused scale
    stage = _stage(result)
    assert "cross-encoder ce (ONNX" in stage.detail
    assert stage.ms is not None and stage.ms > 0


def test_only_the_top_candidates_are_reranked(cross_encoder: Path):
    texts = dict(enumerate(reversed(ENTRIES)))
    hits = [Hit(row=i, snippet_html="", score=1.0 - i / 10) for i in range(4)]
    stage = RerankStage(LocalReranker(), depth=2)
    assert _model_reranked(hits, stage, text=QUERY, texts=texts, timings={}) == ""
    # The first two swap as the model says; the rest keep their places, and
    # the scores stay with the places.
    assert _overlap(texts[1]) > _overlap(texts[0])
    assert [h.row for h in hits] == [1, 0, 2, 3]
    assert [h.score for h in hits] == [1.0, 0.9, 0.8, 0.7]
    assert hits[2].rerank_score is None


@pytest.mark.parametrize("broken", ["no-directory", "garbage-graph", "no-tokenizer"])
def test_a_broken_cross_encoder_degrades_to_fusion_order(
    agent: Any, entries: Any, cross_encoder: Path, settings: Any, broken: str
):
    fused = _order(_search(agent))
    if broken == "no-directory":
        settings.RERANKER_MODEL_DIR = str(cross_encoder.parent / "missing")
    elif broken == "garbage-graph":
        (cross_encoder / "model.onnx").write_bytes(b"not a graph")
    else:
        (cross_encoder / "tokenizer.json").unlink()
    result = _search(agent, "onnx")
    assert _order(result) == fused
    assert result.degraded.startswith("re-rank (onnx) failed: cross-encoder")
    assert result.degraded.endswith("fusion order")
    assert "not used" in _stage(result).detail


def test_a_cross_encoder_slower_than_the_timeout_degrades(
    agent: Any, entries: Any, cross_encoder: Path, settings: Any
):
    fused = _order(_search(agent))
    settings.RERANKER_BATCH = 1
    settings.RERANKER_TIMEOUT = -1.0  # every batch after the first is late
    result = _search(agent, "onnx")
    assert _order(result) == fused
    assert "took longer than" in result.degraded


# --- An HTTP re-rank endpoint -------------------------------------------------


class FakeReranker:
    """A ``POST /v1/rerank`` server on loopback: each answer is a function
    of the request body, or a (status, raw body) pair; every request is
    recorded."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.answer: Any = None
        self.release = threading.Event()  # a held answer waits for this

    def serve(self) -> Iterator[str]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(
                    {
                        "path": self.path,
                        "body": body,
                        "auth": self.headers["Authorization"],
                    }
                )
                if fake.answer == "hold":
                    fake.release.wait(10)
                    status, data = 200, b"{}"
                elif callable(fake.answer):
                    status, data = 200, json.dumps(fake.answer(body)).encode()
                else:
                    status, data = fake.answer
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up waiting

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        thread.start()
        yield f"http://127.0.0.1:{server.server_port}"
        self.release.set()
        server.shutdown()
        server.server_close()


@pytest.fixture
def endpoint(settings: Any) -> Iterator[FakeReranker]:
    fake = FakeReranker()
    for url in fake.serve():
        settings.RERANKER_URL = url
        settings.RERANKER_API_KEY = "rerank-key"
        settings.RERANKER_MODEL = "bge-reranker"
        settings.RERANKER_TIMEOUT = 0.5
        yield fake


def _by_length(body: dict[str, Any]) -> dict[str, Any]:
    """Scores the longest document best (top_n honoured)."""
    docs = body["documents"]
    ranked = sorted(range(len(docs)), key=lambda i: -len(docs[i]))
    results = [{"index": i, "relevance_score": len(docs[i]) / 100} for i in ranked]
    return {"results": results[: body["top_n"]]}


def test_the_endpoint_reorders_the_fused_candidates(
    agent: Any, entries: Any, endpoint: FakeReranker
):
    fused = _order(_search(agent))
    endpoint.answer = _by_length
    result = _search(agent, "http")
    assert _order(result) == sorted(fused, key=len, reverse=True)
    assert _order(result) != fused
    assert result.degraded == ""
    (asked,) = endpoint.requests
    assert asked["path"] == "/v1/rerank"
    assert asked["auth"] == "Bearer rerank-key"
    assert asked["body"] == {
        "query": QUERY,
        "documents": fused,
        "top_n": len(fused),
        "model": "bge-reranker",
    }
    assert "re-rank endpoint 127.0.0.1 (HTTP)" in _stage(result).detail
    assert _stage(result).ms is not None


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ((500, b'{"error": "overloaded"}'), "answered HTTP 500"),
        ((200, b"<html>not json"), "not JSON"),
        ((200, b'{"data": []}'), "no results list"),
        ((200, b'{"results": [{"index": 99, "relevance_score": 1}]}'), "bad result"),
        (
            (200, b'{"results": [{"index": 0, "relevance_score": "high"}]}'),
            "bad result",
        ),
        ("hold", "did not answer within 0.5 s"),
    ],
)
def test_a_failing_endpoint_degrades_to_fusion_order(
    agent: Any, entries: Any, endpoint: FakeReranker, answer: Any, reason: str
):
    fused = _order(_search(agent))
    endpoint.answer = answer
    result = _search(agent, "http")
    endpoint.release.set()
    assert _order(result) == fused
    assert result.degraded.startswith("re-rank (http) failed:")
    assert reason in result.degraded
    assert reason in _stage(result).detail


def test_an_unreachable_or_unset_endpoint_degrades(
    agent: Any, entries: Any, settings: Any
):
    fused = _order(_search(agent))
    settings.RERANKER_URL = ""
    assert "no re-rank endpoint configured" in _search(agent, "http").degraded
    settings.RERANKER_URL = "http://127.0.0.1:9"  # discard: nothing listens
    result = _search(agent, "http")
    assert _order(result) == fused
    assert "could not be reached" in result.degraded


def test_endpoint_answers_of_either_shape_give_each_document_a_score():
    # A document left out scores below every other.
    assert http_scores({"results": [{"index": 1, "relevance_score": 2.5}]}, 3) == [
        1.5,
        2.5,
        1.5,
    ]
    assert http_scores([{"index": 0, "score": 2}, {"index": 1, "score": 3}], 2) == [
        2.0,
        3.0,
    ]
    with pytest.raises(RerankFailed):
        http_scores(
            {"results": [{"index": 0, "score": 1}, {"index": 0, "score": 2}]}, 2
        )
    assert rerank_url("http://h:8080") == "http://h:8080/v1/rerank"
    assert rerank_url("http://h/v1/") == "http://h/v1/rerank"
    assert (
        rerank_url("https://api.example/v2/rerank") == "https://api.example/v2/rerank"
    )


# --- The LLM, listwise ----------------------------------------------------------


def _numbered(request: dict[str, Any]) -> list[str]:
    prompt = request["body"]["messages"][-1]["content"]
    return re.findall(r"^\[\d+\] (.*)$", prompt, flags=re.M)


def test_the_llm_reorders_the_fused_candidates(agent: Any, entries: Any, llm: FakeLLM):
    fused = _order(_search(agent))
    # Last first; the second-to-last left out (it follows the named ones).
    named = list(range(len(fused), 0, -1))
    del named[1]
    llm.answer(completion(json.dumps({"order": named})))
    result = _search(agent, "llm")
    assert _order(result) == [fused[n - 1] for n in named] + [fused[-2]]
    assert result.degraded == ""
    assert _numbered(llm.requests[0]) == fused
    assert "the LLM test-model, listwise" in _stage(result).detail


def test_an_invalid_llm_answer_is_asked_again_once(
    agent: Any, entries: Any, llm: FakeLLM
):
    fused = _order(_search(agent))
    llm.answer(completion('{"order": [1, 1]}'))
    llm.answer(completion(json.dumps({"order": [2, 1]})))
    result = _search(agent, "llm")
    assert _order(result)[:2] == [fused[1], fused[0]]
    assert len(llm.requests) == 2
    assert "named twice" in llm.requests[1]["body"]["messages"][-1]["content"]


@pytest.mark.parametrize(
    ("answers", "reason"),
    [
        (["sure, the first one", "I think [3, 1]"], "not the JSON asked for"),
        ([{"order": [0]}, {"order": ["a"]}], "not the JSON asked for"),
        ([500, 500, 500], "the LLM call failed"),
    ],
)
def test_a_failing_llm_degrades_to_fusion_order(
    agent: Any, entries: Any, llm: FakeLLM, answers: list[Any], reason: str
):
    fused = _order(_search(agent))
    for answer in answers:
        if answer == 500:
            llm.answer({"error": {"message": "down"}}, status=500)
        else:
            text = answer if isinstance(answer, str) else json.dumps(answer)
            llm.answer(completion(text))
    result = _search(agent, "llm")
    assert _order(result) == fused
    assert result.degraded.startswith("re-rank (llm) failed:")
    assert reason in result.degraded


def test_a_slow_llm_degrades_to_fusion_order(
    agent: Any, entries: Any, llm: FakeLLM, settings: Any
):
    fused = _order(_search(agent))
    settings.LLM_TIMEOUT = 0.2
    settings.LLM_MAX_RETRIES = 0
    llm.answer(completion('{"order": [2, 1]}'), delay=1.0)
    result = _search(agent, "llm")
    assert _order(result) == fused
    assert "did not answer in time" in result.degraded


def test_llm_orders_are_checked_before_use():
    assert llm_order({"order": [3, 1]}, 3) == [2, 0]
    for wrong in ({"order": []}, {"order": [4]}, {"order": [True]}, {"rank": [1]}):
        with pytest.raises(ValueError):
            llm_order(wrong, 3)


# --- Off ------------------------------------------------------------------------


def test_with_the_stage_off_no_backend_is_asked(
    agent: Any, entries: Any, endpoint: FakeReranker
):
    result = _search(agent)
    assert endpoint.requests == []
    assert "re-rank model" not in [s.name for s in result.stages]
    assert all(hit.rerank_score is None for _kind, hit in result.hits)
    assert np.isfinite([hit.score for _kind, hit in result.hits]).all()
