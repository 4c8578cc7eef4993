"""What the local cross-encoder adds to a search: scoring 50 (query,
passage) pairs of ~60 tokens, p50 / p95 over 50 runs.

The cross-encoder is a MiniLM-sized BERT (6 layers, hidden 384, 12 heads,
the embedding model's vocabulary and tokenizer) with random weights and a
classification head on [CLS], written into a temporary directory by the
same graph builder as the embedding model (``memory.search.model_install``)
and scored through the search's own loading code
(``memory.search.rerank.LocalReranker``): its cost is its shape's, whatever
the weights.  Beside it, as a reference, the embedding model embedding the
same 50 passages.  Target: p95 <= 40 ms on two cores.  Also what the HTTP
backend itself adds to a search: the same 50 passages sent to a loopback
``/v1/rerank`` server that answers at once (so the figure is the client's
and the protocol's cost; a real endpoint adds its own scoring time).

    .venv/bin/python bench/rerank.py [--pairs 50] [--runs 50] [--threads 2]
        [--batch N] [--int8]
    .venv/bin/python bench/rerank.py --write DIR   # the graph alone, kept
        (to try the re-rank stage end to end: retrieval_eval.py --reranker DIR)
"""

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.common import django_setup

MINILM = {
    "hidden_size": 384,
    "num_attention_heads": 12,
    "num_hidden_layers": 6,
    "intermediate_size": 1536,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "layer_norm_eps": 1e-12,
    "hidden_act": "gelu",
}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt")
PASSAGE = (
    "On Saturday we drove out to the lake with Caroline and her sister, set"
    " up the tent by the water and talked until late about the charity run"
    " and her new job at the museum in Stockholm next spring."
)


def random_cross_encoder(dest: Path, tokenizer_dir: Path) -> None:
    """A MiniLM-shaped cross-encoder with random weights in ``dest``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from safetensors.numpy import save_file

    from memory.search.model_install import bert_onnx_model

    vocab = sum(1 for _ in (tokenizer_dir / "vocab.txt").open())
    h, inner = MINILM["hidden_size"], MINILM["intermediate_size"]
    rng = np.random.default_rng(7)

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    weights = {
        "embeddings.word_embeddings.weight": w(vocab, h),
        "embeddings.position_embeddings.weight": w(512, h),
        "embeddings.token_type_embeddings.weight": w(2, h),
        "embeddings.LayerNorm.weight": np.ones(h, np.float32),
        "embeddings.LayerNorm.bias": np.zeros(h, np.float32),
    }
    for i in range(MINILM["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        shapes = {
            "attention.self.query": (h, h),
            "attention.self.key": (h, h),
            "attention.self.value": (h, h),
            "attention.output.dense": (h, h),
            "intermediate.dense": (inner, h),
            "output.dense": (h, inner),
        }
        for name, (out, into) in shapes.items():
            weights[f"{p}.{name}.weight"] = w(out, into)
            weights[f"{p}.{name}.bias"] = w(out)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            weights[f"{p}.{norm}.weight"] = np.ones(h, np.float32)
            weights[f"{p}.{norm}.bias"] = np.zeros(h, np.float32)
    save_file(weights, str(dest / "weights.safetensors"))
    model = bert_onnx_model(dest / "weights.safetensors", MINILM)
    (dest / "weights.safetensors").unlink()

    # The usual sequence-classification head: [CLS] -> dense + tanh -> 1 logit.
    graph = model.graph
    del graph.output[:]
    graph.initializer.extend(
        [
            numpy_helper.from_array(np.array(0, np.int64), "cls_index"),
            numpy_helper.from_array(w(h, h), "pooler_w"),
            numpy_helper.from_array(w(h), "pooler_b"),
            numpy_helper.from_array(w(h, 1), "classifier_w"),
            numpy_helper.from_array(w(1), "classifier_b"),
        ]
    )
    graph.node.extend(
        [
            helper.make_node(
                "Gather", ["last_hidden_state", "cls_index"], ["cls"], axis=1
            ),
            helper.make_node("MatMul", ["cls", "pooler_w"], ["pooled_mm"]),
            helper.make_node("Add", ["pooled_mm", "pooler_b"], ["pooled_pre"]),
            helper.make_node("Tanh", ["pooled_pre"], ["pooled"]),
            helper.make_node("MatMul", ["pooled", "classifier_w"], ["logit_mm"]),
            helper.make_node("Add", ["logit_mm", "classifier_b"], ["logits"]),
        ]
    )
    graph.output.append(
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])
    )
    onnx.checker.check_model(model)
    onnx.save_model(model, str(dest / "model.onnx"))
    for name in TOKENIZER_FILES:
        shutil.copyfile(tokenizer_dir / name, dest / name)
    (dest / "config.json").write_text(json.dumps(MINILM))


def instant_endpoint():
    """A loopback ``/v1/rerank`` server answering at once; its URL and a
    function that stops it."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
        # Headers and body in one segment: two small writes would wait out
        # the peer's delayed ACK (~40 ms), which no real server does.
        wbufsize = 1 << 16

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            results = [
                {"index": i, "relevance_score": 1.0 / (i + 1)}
                for i in range(len(body["documents"]))
            ]
            data = json.dumps({"results": results}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return f"http://127.0.0.1:{server.server_port}", stop


def timed(call, runs: int) -> tuple[float, float]:
    """p50 / p95 in ms of ``runs`` calls (after two warm-up calls)."""
    call()
    call()
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        call()
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    return statistics.median(samples), samples[max(0, round(0.95 * runs) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=50)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=0, help="0: the setting's")
    parser.add_argument("--write", type=Path, help="only write the model to DIR")
    parser.add_argument(
        "--int8", action="store_true", help="weights quantised to int8 (dynamic)"
    )
    args = parser.parse_args()
    django_setup("pattern-bench-rerank-")
    from django.conf import settings
    from tokenizers import Tokenizer

    from memory.search.embedder import embed_texts, embedding_status
    from memory.search.rerank import HttpReranker, LocalReranker

    if not embedding_status().available:
        sys.exit(f"needs the embedding model: {embedding_status().reason}")
    tokenizer_dir = Path(settings.EMBEDDING_MODEL_DIR)
    if args.write:
        args.write.mkdir(parents=True, exist_ok=True)
        random_cross_encoder(args.write, tokenizer_dir)
        print(f"random-weight cross-encoder written to {args.write}")
        return
    passages = [f"{i}. {PASSAGE}" for i in range(args.pairs)]
    query = "When did Caroline go camping by the lake?"
    tokenizer = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    tokenizer.no_padding()
    tokens = len(tokenizer.encode(query, passages[0]).ids)
    with tempfile.TemporaryDirectory(prefix="pattern-bench-rerank-") as tmp:
        random_cross_encoder(Path(tmp), tokenizer_dir)
        if args.int8:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            graph = Path(tmp) / "model.onnx"
            quantize_dynamic(graph, graph, weight_type=QuantType.QInt8)
        settings.RERANKER_MODEL_DIR = tmp
        settings.RERANKER_THREADS = args.threads
        if args.batch:
            settings.RERANKER_BATCH = args.batch
        settings.RERANKER_TIMEOUT = 60.0
        reranker = LocalReranker()
        p50, p95 = timed(lambda: reranker.scores(query, passages), args.runs)
        e50, e95 = timed(lambda: embed_texts(passages), args.runs)
    url, stop = instant_endpoint()
    settings.RERANKER_URL = url
    try:
        endpoint = HttpReranker()
        h50, h95 = timed(lambda: endpoint.scores(query, passages), args.runs)
    finally:
        stop()
    print(
        f"{args.pairs} pairs of {tokens} tokens, {args.runs} runs,"
        f" {args.threads} threads, batch {settings.RERANKER_BATCH}"
        f"{', int8 weights' if args.int8 else ''}"
    )
    print(
        f"cross-encoder (6 layers, hidden 384): p50 {p50:.1f} ms, p95 {p95:.1f} ms"
        f"  (target p95 <= 40 ms: {'met' if p95 <= 40 else 'MISSED'})"
    )
    print(f"embedding model, same passages:      p50 {e50:.1f} ms, p95 {e95:.1f} ms")
    print(f"HTTP backend, instant endpoint:      p50 {h50:.1f} ms, p95 {h95:.1f} ms")


if __name__ == "__main__":
    main()
