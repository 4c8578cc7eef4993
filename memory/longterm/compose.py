"""The message history of a model request, compressed to fit.

Token limits come per model family (``ModelContextLimits``, the longest
matching prefix of the model name), overridden per constellation by its
``ContextConfig.model_overrides``.  Tokens are counted with the model's own
BPE encoding for OpenAI model families (``bpe-openai`` ships them, no
download), and estimated for every other model: words cost one token per
four characters, rounded up, and every other non-space character one token
- close to BPE tokenizers on English prose and never zero for code or JSON.

History is read newest first as batches: a run of messages sharing a batch
id (one incoming message and everything it caused).  A batch is kept or
dropped whole, so a tool call and its result are never split.  The active
batch (the turn being answered) is always sent; any other batch whose tool
calls and results do not pair up (a turn that crashed half-way) is left
out, since a model API refuses a call without its result.  Older batches
are kept while they fit the history budget, ``max_messages_cap`` and, when
truncating, ``keep_recent``; everything older than the first that does not
fit is evicted.  With recursive summarization the evicted batches are
summarised by a Celery task once ``chunk_size`` messages wait, and the
summary is sent as a message at the head of the history in their stead.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

from memory.longterm.models import (
    CompressionKind,
    ContextConfig,
    Conversation,
    Message,
    MessageRole,
)
from pattern_site.kernel.agents.models import Constellation
from pattern_site.kernel.db.compiled import CompiledQuery
from pattern_site.kernel.errors import InvalidInput


@dataclass(frozen=True)
class ModelContextLimits:
    max_tokens: int
    memory_tokens: int
    history_tokens: int
    reserved_response_tokens: int


LIMIT_FIELDS = tuple(ModelContextLimits.__dataclass_fields__)
DEFAULT_LIMITS = ModelContextLimits(128_000, 16_000, 96_000, 8_000)
# Longest matching prefix of the agent's model name wins.
MODEL_LIMITS: dict[str, ModelContextLimits] = {
    "claude": ModelContextLimits(200_000, 24_000, 160_000, 8_000),
    "gpt-4o": ModelContextLimits(128_000, 16_000, 96_000, 8_000),
    "gpt-4.1": ModelContextLimits(1_000_000, 32_000, 900_000, 16_000),
    "gemini": ModelContextLimits(1_000_000, 32_000, 900_000, 16_000),
    "llama": ModelContextLimits(8_192, 2_000, 4_000, 1_024),
}


def limits_parse(raw: Any) -> ModelContextLimits:
    """Limits from their JSON form; all four, positive, and the parts
    within the whole."""
    if not isinstance(raw, dict) or set(raw) != set(LIMIT_FIELDS):
        raise InvalidInput(f"model limits need exactly {', '.join(LIMIT_FIELDS)}")
    if not all(isinstance(v, int) and v > 0 for v in raw.values()):
        raise InvalidInput("model limits are positive integers")
    limits = ModelContextLimits(**raw)
    parts = limits.memory_tokens + limits.history_tokens
    if parts + limits.reserved_response_tokens > limits.max_tokens:
        raise InvalidInput(
            f"memory ({limits.memory_tokens}) + history ({limits.history_tokens})"
            f" + response ({limits.reserved_response_tokens}) tokens exceed"
            f" max_tokens ({limits.max_tokens})"
        )
    return limits


def model_limits(
    model_name: str, overrides: dict[str, ModelContextLimits] | None = None
) -> ModelContextLimits:
    """The limits of ``model_name``: the longest matching prefix among the
    constellation's ``overrides``, else among the built-in families."""
    name = (model_name or "").lower()
    for table in (overrides or {}, MODEL_LIMITS):
        matches = [prefix for prefix in table if name.startswith(prefix.lower())]
        if matches:
            return table[max(matches, key=len)]
    return DEFAULT_LIMITS


_TOKEN = re.compile(r"\w+|[^\w\s]")


def estimate_tokens(text: str) -> int:
    return sum(
        math.ceil(len(piece) / 4) if piece[0].isalnum() or piece[0] == "_" else 1
        for piece in _TOKEN.findall(text)
    )


# OpenAI families newer than bpe-openai's model table, as tiktoken maps them.
NEWER_OPENAI_FAMILIES = {
    "gpt-5": "o200k_base",
    "o1": "o200k_base",
    "o3": "o200k_base",
    "o4": "o200k_base",
    "chatgpt-4o": "o200k_base",
}


@lru_cache(maxsize=64)
def _encoding(model_name: str) -> Any:
    """The encoding of the longest known model name prefixing
    ``model_name`` (dated and sized variants share their family's)."""
    import bpe_openai

    families = {
        name: bpe_openai.encoding_name_for_model(name)
        for name in bpe_openai.list_supported_models()
        if not name.endswith("_base")
    } | NEWER_OPENAI_FAMILIES
    matches = [name for name in families if model_name.startswith(name)]
    if not matches:
        return None
    return bpe_openai.get_encoding(families[max(matches, key=len)])


def _base_model(model_name: str) -> str:
    """The model name without a provider prefix ("openai/gpt-4o")."""
    return (model_name or "").lower().rsplit("/", 1)[-1]


@dataclass(frozen=True)
class TokenCounter:
    count: Callable[[str], int]
    kind: str


# Every request counts the history it keeps again (each step of a turn
# composes it anew), so the counts of recent texts are kept, per encoding:
# at most this many texts of at most this many characters.
COUNTS_KEPT = 2048
COUNTED_TEXT_CHARS = 4000


@lru_cache(maxsize=16)
def _counts_kept(encoding: Any) -> Callable[[str], int]:
    """Counting with ``encoding`` (None: the estimate), recent texts'
    counts kept."""

    def measure(text: str) -> int:
        if encoding is None:
            return estimate_tokens(text)
        return len(encoding.encode_ordinary(text))

    kept = lru_cache(maxsize=COUNTS_KEPT)(measure)

    def count(text: str) -> int:
        return measure(text) if len(text) > COUNTED_TEXT_CHARS else kept(text)

    return count


def token_counter(model_name: str) -> TokenCounter:
    """The model's own BPE tokenizer for OpenAI families, else the
    estimate."""
    encoding = _encoding(_base_model(model_name)) if model_name else None
    if encoding is None:
        return TokenCounter(_counts_kept(None), "heuristic (words/4 + symbols)")
    return TokenCounter(_counts_kept(encoding), f"bpe {encoding.name}")


# What a chat format adds around each message (role, separators).
MESSAGE_OVERHEAD_TOKENS = 4


@dataclass(frozen=True)
class HistoryMessage:
    position: int
    role: str
    content: str
    batch_id: str = ""
    tool_calls: tuple[dict[str, str], ...] = ()
    tool_call_id: str = ""
    author: str = ""

    def as_request(self) -> dict[str, Any]:
        """The message as an OpenAI-compatible chat message."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["content"] = self.content or None
            out["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for c in self.tool_calls
            ]
        if self.tool_call_id:
            out["tool_call_id"] = self.tool_call_id
        return out

    def tokens(self, count: Callable[[str], int]) -> int:
        # A held row is counted again at each step of a turn: its count is
        # kept with it, for the counter that made it.  (Written to the
        # instance's dict, as ``functools.cached_property`` does, which a
        # frozen dataclass allows.)
        kept = self.__dict__.get("_counted")
        if kept is not None and kept[0] is count:
            return kept[1]  # type: ignore[no-any-return]
        calls = sum(count(c["name"]) + count(c["arguments"]) for c in self.tool_calls)
        tokens = MESSAGE_OVERHEAD_TOKENS + count(self.content) + calls
        self.__dict__["_counted"] = (count, tokens)
        return tokens


@dataclass
class Batch:
    key: str
    messages: list[HistoryMessage] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Every tool call answered in the batch and every result asked for."""
        calls = {c["id"] for m in self.messages for c in m.tool_calls}
        answers = {m.tool_call_id for m in self.messages if m.role == MessageRole.TOOL}
        return calls == answers

    @property
    def first(self) -> int:
        return self.messages[0].position

    @property
    def last(self) -> int:
        return self.messages[-1].position


def batches_newest_first(messages: Iterable[HistoryMessage]) -> Iterator[Batch]:
    """Runs of messages with one batch id (a message without one is a batch
    of its own), from messages given newest first; each batch in order."""
    current: Batch | None = None
    for message in messages:
        key = message.batch_id or f"#{message.position}"
        if current is not None and current.key != key:
            current.messages.reverse()
            yield current
            current = None
        if current is None:
            current = Batch(key)
        current.messages.append(message)
    if current is not None:
        current.messages.reverse()
        yield current


@dataclass(frozen=True)
class Truncate:
    keep_recent: int


@dataclass(frozen=True)
class RecursiveSummarization:
    chunk_size: int
    model: str


CompressionStrategy = Truncate | RecursiveSummarization


@dataclass(frozen=True)
class HistoryConfig:
    model_overrides: dict[str, ModelContextLimits]
    compression: CompressionStrategy
    max_messages_cap: int

    def limits(self, model_name: str) -> ModelContextLimits:
        return model_limits(model_name, self.model_overrides)


def history_config_for(*, constellation: Constellation | int) -> HistoryConfig:
    """The constellation's history settings (the defaults when it has none)."""
    constellation_id = getattr(constellation, "pk", constellation)
    row = ContextConfig.objects.filter(constellation_id=constellation_id).first()
    row = row or ContextConfig()
    compression: CompressionStrategy = (
        RecursiveSummarization(row.chunk_size, row.summarization_model)
        if row.compression == CompressionKind.SUMMARIZE
        else Truncate(row.keep_recent)
    )
    return HistoryConfig(
        model_overrides={
            prefix: limits_parse(raw) for prefix, raw in row.model_overrides.items()
        },
        compression=compression,
        max_messages_cap=row.max_messages_cap,
    )


@dataclass
class Compressed:
    """Batches oldest first: those sent, and (positions) what was left out."""

    kept: list[Batch]
    tokens: int
    evicted_through: int = 0
    incomplete: list[str] = field(default_factory=list)


def batches_compress(
    batches: Iterable[Batch],
    *,
    active: str,
    budget: int,
    max_messages: int,
    keep_recent: int | None,
    count: Callable[[str], int],
) -> Compressed:
    """Keep batches, given newest first, while they fit: the active batch
    always, other incomplete batches never, the rest whole, until the first
    that does not fit (it and all older ones are evicted)."""
    kept: list[Batch] = []
    result = Compressed(kept=kept, tokens=0)
    messages = 0
    batches = iter(batches)
    seen_active = not active
    for batch in batches:
        if batch.key == active:
            kept.append(batch)
            messages += len(batch.messages)
            result.tokens += sum(m.tokens(count) for m in batch.messages)
            seen_active = True
            continue
        if not batch.complete:
            result.incomplete.append(batch.key)
            continue
        tokens = sum(m.tokens(count) for m in batch.messages)
        size = messages + len(batch.messages)
        if (
            result.tokens + tokens > budget
            or size > max_messages
            or (keep_recent is not None and size > keep_recent)
        ):
            result.evicted_through = batch.last
            break
        kept.append(batch)
        messages = size
        result.tokens += tokens
    if not seen_active:
        # The active batch is older than what was evicted (another turn
        # came in meanwhile): it is sent all the same.
        for batch in batches:
            if batch.key == active:
                kept.append(batch)
                result.tokens += sum(m.tokens(count) for m in batch.messages)
                break
    kept.reverse()
    return result


SUMMARY_HEADER = "Summary of the earlier conversation:"
# Rows read at a time, newest first, until the history is full.
PAGE = 200
# Rows read past what is likely kept: the rest of the batch that does not
# fit, whose end the compression has to see.
FIRST_PAGE_MARGIN = 20


@dataclass
class ComposedHistory:
    messages: list[dict[str, Any]]
    tokens: int
    metadata: dict[str, Any]


@dataclass
class HeldRows:
    """The history rows of one conversation that earlier compositions read
    (newest first, without a gap from the newest down), for a caller that
    composes again and again (a turn, every step).  Messages are never
    changed once appended, and an append takes the position after the
    last committed one, so a later composition reads only the rows
    appended since, and older ones past what is held."""

    conversation_id: int = 0
    # Rows after this position (the summary's end when summarizing).
    after: int = -1
    rows: list[HistoryMessage] = field(default_factory=list)
    # The rows reach back to the first after ``after``.
    complete: bool = False


_ROW_FIELDS = (
    "position",
    "role",
    "content",
    "batch_id",
    "tool_calls",
    "tool_call_id",
    "author",
)


def _messages(rows: Iterable[tuple]) -> list[HistoryMessage]:
    return [
        HistoryMessage(position, role, content, batch, tuple(calls), call_id, author)
        for position, role, content, batch, calls, call_id, author in rows
    ]


def _rows_read(rows: Any, limit: int | None = None) -> list[HistoryMessage]:
    """``rows`` (a queryset of messages) newest first, at most ``limit``."""
    listed = rows.order_by("-position").values_list(*_ROW_FIELDS)
    return _messages(listed if limit is None else listed[:limit])


# Read at every step of a turn (what was appended since the held rows):
# compiled once.
_ROWS_AFTER = CompiledQuery(
    lambda conversation_id, position: (
        Message.objects.filter(conversation_id=conversation_id, position__gt=position)
        .order_by("-position")
        .values_list(*_ROW_FIELDS)
    ),
    conversation_id=-4_170_001,
    position=4_170_002,
)


def _history_rows(
    conversation: Conversation,
    after: int,
    *,
    first: int = PAGE,
    held: HeldRows | None = None,
) -> Iterator[HistoryMessage]:
    """The messages newest first, in pages; ``first``: the first page's
    size, enough for what is likely kept, so that the batch ending it is
    found without reading (and decoding) a whole page more.  ``held``: the
    rows read before, kept up to date with what is read now."""
    if held is not None and (held.conversation_id, held.after) != (
        conversation.pk,
        after,
    ):
        held.conversation_id, held.after = conversation.pk, after
        held.rows, held.complete = [], False
    before: int | None = None
    size = first
    if held is not None and held.rows:
        held.rows[:0] = _messages(
            _ROWS_AFTER.rows(
                conversation_id=conversation.pk, position=held.rows[0].position
            )
        )
        yield from held.rows
        if held.complete:
            return
        before, size = held.rows[-1].position, PAGE
    while True:
        rows = Message.objects.filter(conversation=conversation, position__gt=after)
        if before is not None:
            rows = rows.filter(position__lt=before)
        page = _rows_read(rows, size)
        if held is not None:
            held.rows += page
            held.complete = len(page) < size
        yield from page
        if len(page) < size:
            return
        before, size = page[-1].position, PAGE


def history_compose(
    *,
    conversation: Conversation,
    model_name: str,
    active_batch_id: str = "",
    config: HistoryConfig | None = None,
    counter: TokenCounter | None = None,
    held: HeldRows | None = None,
) -> ComposedHistory:
    """The conversation's history as chat messages for ``model_name``,
    within its history budget (see the module docstring); with recursive
    summarization, queues the summary of what waits evicted.  ``held``:
    the rows an earlier composition of this caller read (``HeldRows``)."""
    config = config or history_config_for(constellation=conversation.constellation_id)
    counter = counter or token_counter(model_name)
    limits = config.limits(model_name)
    strategy = config.compression
    summarizing = isinstance(strategy, RecursiveSummarization)
    after = conversation.summary_through if summarizing else 0
    head: list[dict[str, Any]] = []
    if summarizing and conversation.summary:
        text = f"{SUMMARY_HEADER}\n{conversation.summary}"
        head = [{"role": "system", "content": text}]
    head_tokens = sum(
        MESSAGE_OVERHEAD_TOKENS + counter.count(m["content"]) for m in head
    )
    wanted = config.max_messages_cap
    if isinstance(strategy, Truncate):
        wanted = min(wanted, strategy.keep_recent)
    compressed = batches_compress(
        batches_newest_first(
            _history_rows(
                conversation, after, first=wanted + FIRST_PAGE_MARGIN, held=held
            )
        ),
        active=active_batch_id,
        budget=max(0, limits.history_tokens - head_tokens),
        max_messages=config.max_messages_cap - len(head),
        keep_recent=strategy.keep_recent if isinstance(strategy, Truncate) else None,
        count=counter.count,
    )
    waiting = max(0, compressed.evicted_through - after)
    if summarizing and waiting >= strategy.chunk_size:
        from memory.longterm.tasks import conversation_summarize_task

        conversation_summarize_task.delay_on_commit(
            conversation.pk, compressed.evicted_through
        )
    messages = head + [m.as_request() for b in compressed.kept for m in b.messages]
    return ComposedHistory(
        messages=messages,
        tokens=compressed.tokens + head_tokens,
        metadata={
            "limits": asdict(limits),
            "compression": {"kind": type(strategy).__name__, **asdict(strategy)},
            "history_tokens": compressed.tokens + head_tokens,
            "messages": len(messages),
            "batches": len(compressed.kept),
            "summary_through": after,
            "evicted_through": compressed.evicted_through,
            "evicted_waiting_summary": waiting if summarizing else 0,
            "incomplete_batches_left_out": compressed.incomplete,
            "tokenizer": counter.kind,
        },
    )
