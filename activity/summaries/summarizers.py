"""Who writes summaries: an LLM when one is configured, else extraction.

Both take plain inputs (texts, speakers, times), never models of other
apps.  The extractive summarizer picks the most central sentences: by
cosine similarity of embeddings from the injected ``embed`` callable, or,
with no embedding model, by TF-IDF word overlap.  It writes nothing of its
own, and its ``model`` says so (``extractive:embedding`` /
``extractive:lexical``).
"""

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from activity.llm.client import ChatClient, chat_client, prompt_render
from activity.summaries.models import EXTRACTIVE_PREFIX

Embed = Callable[[list[str]], Sequence[Any] | None]

SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
WORD = re.compile(r"[^\W_]{2,}")
AGENT_SENTENCES = 3
CONSTELLATION_SENTENCES = 4
MAX_ITEMS = 8


@dataclass(frozen=True)
class SummaryMessage:
    speaker: str
    text: str
    at: datetime


@dataclass(frozen=True)
class Draft:
    summary: str
    model: str
    tokens: int = 0
    key_decisions: list[str] = field(default_factory=list)
    open_threads: list[str] = field(default_factory=list)


class Summarizer(Protocol):
    def agent(
        self,
        *,
        constellation_id: int,
        agent_name: str,
        previous: str,
        messages: Sequence[SummaryMessage],
    ) -> Draft: ...

    def constellation(
        self,
        *,
        constellation_id: int,
        period: tuple[datetime, datetime],
        events: list[str],
        notables: list[str],
        agent_summaries: list[str],
    ) -> Draft: ...


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in SENTENCE_END.split(" ".join(text.split())) if s.strip()]


def _lexical_vectors(texts: list[str]) -> np.ndarray:
    docs = [Counter(WORD.findall(t.lower())) for t in texts]
    vocabulary = {w: i for i, w in enumerate(sorted({w for d in docs for w in d}))}
    matrix = np.zeros((len(texts), max(1, len(vocabulary))), dtype=np.float32)
    df = Counter(w for d in docs for w in d)
    for row, doc in enumerate(docs):
        for word, n in doc.items():
            matrix[row, vocabulary[word]] = n * math.log(1 + len(texts) / df[word])
    return matrix


def central(texts: list[str], k: int, embed: Embed | None) -> tuple[list[int], str]:
    """Indexes of the ``k`` most central ``texts`` in their original order,
    and which similarity ranked them (``embedding`` or ``lexical``)."""
    if len(texts) <= k:
        return list(range(len(texts))), "lexical" if embed is None else "embedding"
    vectors = embed(texts) if embed is not None else None
    kind = "embedding"
    if vectors is None:
        matrix, kind = _lexical_vectors(texts), "lexical"
    else:
        matrix = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix = matrix / np.where(norms == 0, 1, norms)
    centrality = (matrix @ matrix.T).sum(axis=1)
    best = np.argsort(-centrality, kind="stable")[:k]
    return sorted(int(i) for i in best), kind


class ExtractiveSummarizer:
    def __init__(self, embed: Embed | None = None) -> None:
        self.embed = embed

    def agent(
        self,
        *,
        constellation_id: int,
        agent_name: str,
        previous: str,
        messages: Sequence[SummaryMessage],
    ) -> Draft:
        pieces = list(
            dict.fromkeys(
                [
                    (m.speaker, sentence)
                    for m in messages
                    for sentence in _sentences(m.text)
                    if len(sentence) >= 12
                ]
                or [(m.speaker, m.text) for m in messages]
            )
        )
        picked, kind = central([p[1] for p in pieces], AGENT_SENTENCES, self.embed)
        text = " ".join(f"{pieces[i][0]}: {pieces[i][1]}" for i in picked)
        return Draft(summary=text, model=EXTRACTIVE_PREFIX + kind)

    def constellation(
        self,
        *,
        constellation_id: int,
        period: tuple[datetime, datetime],
        events: list[str],
        notables: list[str],
        agent_summaries: list[str],
    ) -> Draft:
        # Repeated lines would be the most central and say the same thing.
        texts = list(dict.fromkeys(events + agent_summaries))
        picked, kind = central(texts, CONSTELLATION_SENTENCES, self.embed)
        threads = [t for t in texts if t.rstrip().endswith("?")][-MAX_ITEMS:]
        return Draft(
            summary=" ".join(texts[i].rstrip(".") + "." for i in picked),
            model=EXTRACTIVE_PREFIX + kind,
            key_decisions=list(dict.fromkeys(notables))[:MAX_ITEMS],
            open_threads=threads,
        )


def _bullets(items: Sequence[str]) -> str:
    return "\n".join(f"- {item}" for item in items) or "(none)"


def constellation_answer_validate(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")
    summary = value.get("summary")
    if not isinstance(summary, str) or not summary.strip():
        raise ValueError('"summary" must be a non-empty string')
    lists = {}
    for key in ("key_decisions", "open_threads"):
        items = value.get(key, [])
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise ValueError(f'"{key}" must be a list of strings')
        lists[key] = [" ".join(i.split()) for i in items if i.strip()][:MAX_ITEMS]
    return {"summary": summary.strip(), **lists}


class LLMSummarizer:
    def __init__(self, client: ChatClient) -> None:
        self.client = client

    def agent(
        self,
        *,
        constellation_id: int,
        agent_name: str,
        previous: str,
        messages: Sequence[SummaryMessage],
    ) -> Draft:
        transcript = "\n".join(
            f"[{m.at:%Y-%m-%d %H:%M}] {m.speaker}: {m.text}" for m in messages
        )
        prompt = prompt_render(
            "agent_summary",
            agent_name=agent_name,
            previous_summary=previous or "(none)",
            messages=transcript,
        )
        completion = self.client.complete(
            constellation_id=constellation_id,
            messages=[{"role": "user", "content": prompt}],
        )
        return Draft(
            summary=completion.text, model=completion.model, tokens=completion.tokens
        )

    def constellation(
        self,
        *,
        constellation_id: int,
        period: tuple[datetime, datetime],
        events: list[str],
        notables: list[str],
        agent_summaries: list[str],
    ) -> Draft:
        prompt = prompt_render(
            "constellation_summary",
            period_start=f"{period[0]:%Y-%m-%d %H:%M} UTC",
            period_end=f"{period[1]:%Y-%m-%d %H:%M} UTC",
            agent_summaries=_bullets(agent_summaries),
            notables=_bullets(notables),
            events=_bullets(events),
        )
        value, completion = self.client.complete_json(
            constellation_id=constellation_id,
            messages=[{"role": "user", "content": prompt}],
            validate=constellation_answer_validate,
        )
        return Draft(
            summary=value["summary"],
            model=completion.model,
            tokens=completion.tokens,
            key_decisions=value["key_decisions"],
            open_threads=value["open_threads"],
        )


def summarizer_get(embed: Embed | None = None, *, model: str = "") -> Summarizer:
    """The LLM summarizer (``model``, default ``LLM_MODEL``) when a provider
    is configured, else the extractive one."""
    client = chat_client(model=model)
    if client is None:
        return ExtractiveSummarizer(embed)
    return LLMSummarizer(client)


def summarizer_status() -> dict[str, Any]:
    """Which summarizer writes summaries, for health and the dashboard."""
    from django.conf import settings

    if settings.LLM_BASE_URL and settings.LLM_MODEL:
        return {
            "kind": "llm",
            "model": settings.LLM_MODEL,
            "detail": "summaries written by an OpenAI-compatible model",
            "daily_token_budget": settings.LLM_DAILY_TOKEN_BUDGET,
        }
    return {
        "kind": "extractive",
        "model": None,
        "detail": (
            "no LLM configured (PATTERN_LLM_BASE_URL, PATTERN_LLM_MODEL): "
            "summaries are sentences picked from the source, not written"
        ),
    }
