"""Consolidation: archival memory that is maintained, not only appended.

One run takes one scope, an agent's own entries (its agent- and
conversation-tier ones) or a constellation's constellation-tier entries,
and, scoring every live entry with the tier decay (``memory.longterm.decay``):

1. promotes short-term entries that proved relevant to long-term;
2. merges duplicates: with an LLM configured, the model decides for each
   newer entry and its near neighbours, in mem0's shape (add, update,
   delete, no-op; an invalid answer falls back to the rules); without
   one, the rules merge entries whose vectors' cosine passes
   ``DEDUP_COSINE`` or whose texts are the same (but for case, spacing and
   the punctuation around words), when one text adds no detail to the
   other (``says_no_more``);
3. prunes short-term and conversation entries whose relevance fell below
   ``PRUNE_FLOOR``;
4. keeps the scope within its cap by superseding the least relevant.

Nothing is destroyed: a merged or pruned entry is marked superseded (by
which entry, why, when) and can be restored.  The LLM is asked before the
write transaction opens; the decisions are applied only to entries whose
text did not change meanwhile.  A run is recorded (``ConsolidationRun``)
and running it again straight away changes nothing more.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from activity.llm.client import chat_client
from memory.longterm.decay import TierDecay, tier_decay
from memory.longterm.indexes import ARCHIVAL_INDEX
from memory.longterm.models import (
    ArchivalEntry,
    ArchivalLifetime,
    ArchivalTier,
    ConsolidationRun,
    SupersededReason,
)
from memory.longterm.selectors import retrieval_config_for
from memory.longterm.services import (
    ARCHIVAL_MAX_CHARS,
    MAX_TAGS,
    archival_entry_supersede,
    archival_entry_update,
    history_event,
)
from memory.search.index import index_vectors
from memory.search.query import STOP_WORDS
from memory.search.registry import EmbeddingState
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent, Constellation
from pattern_site.kernel.errors import ApplicationError, InvalidInput
from pattern_site.kernel.events import EventType, event_record

logger = logging.getLogger(__name__)

PROMOTE_RELEVANCE = 0.7
PROMOTE_ACCESSES = 3
DEDUP_COSINE = 0.95
# Pairs this close are shown to the LLM, which tells a rephrasing or a
# contradiction from a distinct fact; the rules alone merge only above
# DEDUP_COSINE.
LLM_CANDIDATE_COSINE = 0.8
LLM_MAX_CANDIDATES = 5
PRUNE_FLOOR = 0.01

LLM_EVENTS = ("ADD", "UPDATE", "DELETE", "NONE")

LLM_INSTRUCTIONS = (
    "You maintain an AI agent's long-term memory. You get one new fact and"
    " existing memories that resemble it, as JSON. Decide what to do with the"
    " new fact and answer with only a JSON object"
    ' {"event": ..., "id": ..., "text": ...}:\n'
    '- "ADD": it is a distinct fact; keep both ("id": null).\n'
    '- "NONE": an existing memory already says it; "id" is that memory.\n'
    '- "UPDATE": it refines an existing memory; "id" is that memory and'
    ' "text" the combined memory that replaces it.\n'
    '- "DELETE": it contradicts an existing memory, which is now wrong;'
    ' "id" is that memory.\n'
    'Only use ids of the memories given. "text" is required for UPDATE only.'
)


@dataclass
class _Counts:
    scored: int = 0
    promoted: int = 0
    merged: int = 0
    contradicted: int = 0
    pruned: int = 0
    capped: int = 0


@dataclass(frozen=True)
class Decision:
    """What to do with ``new`` given an existing entry ``old``."""

    event: str  # one of LLM_EVENTS
    new: int
    old: int | None = None
    text: str = ""


@dataclass
class _Scope:
    constellation: Constellation
    agent: Agent | None
    decay: TierDecay
    cap: int
    entries: list[ArchivalEntry] = field(default_factory=list)


def _scope_rows(
    *, constellation: Constellation, agent: Agent | None
) -> QuerySet[ArchivalEntry]:
    qs = ArchivalEntry.objects.filter(
        constellation=constellation, superseded_at__isnull=True
    )
    if agent is not None:
        return qs.filter(
            agent=agent, tier__in=[ArchivalTier.AGENT, ArchivalTier.CONVERSATION]
        )
    return qs.filter(tier=ArchivalTier.CONSTELLATION)


# What tells two texts apart: words with the punctuation inside them kept
# (3.5, isn't, e-mail, 10:30), a sign or currency before one (-5, $5), and a
# question mark.  Case, spacing and the punctuation around words (a full
# stop, a comma, an exclamation mark, quotes) do not make another fact.
_TEXT_TOKEN = re.compile(r"[-+$€£]?\w+(?:[.,'\u2019:/-]\w+)*|\?")


def _normalised(text: str) -> str:
    """``text`` as the exact-text comparison sees it; a text without a
    word (emoji, symbols) is compared as written but for case and spacing."""
    lowered = text.lower()
    return " ".join(_TEXT_TOKEN.findall(lowered)) or " ".join(lowered.split())


# A pair that disagrees on these is a question beside a statement, or a
# statement beside its denial: never the same fact.
_POLARITY_WORDS = frozenset(
    ["?", "not", "no", "never", "none", "nothing", "nobody", "neither", "nor"]
)
# Words that carry no detail of a fact: a pair that differs only in these
# (and in case, spacing, punctuation and a plural's -s) says the same.
_FUNCTION_WORDS = STOP_WORDS - _POLARITY_WORDS


def _content_words(text: str) -> frozenset[str]:
    """The words of ``text`` that say something, as the rules compare them."""
    words = set()
    for token in _TEXT_TOKEN.findall(text.lower().replace("\u2019", "'")):
        token = token.removesuffix("'s")
        if token.endswith("n't"):
            words.add("not")
            token = token[:-3]
        elif len(token) > 3 and token.endswith("s") and not token.endswith("ss"):
            token = token[:-1]
        if token and token not in _FUNCTION_WORDS:
            words.add(token)
    return frozenset(words)


def says_no_more(text: str, than: str) -> bool:
    """Whether ``text`` adds no detail to ``than``: every word of it that
    carries meaning is in ``than``, and both ask or deny alike.  A pair of
    near-duplicate vectors where each names something the other does not
    ("every Monday" beside "twice a year") is two facts: a cosine cannot
    tell another detail from a rephrasing, so the rules keep both."""
    mine, theirs = _content_words(text), _content_words(than)
    return mine <= theirs and mine & _POLARITY_WORDS == theirs & _POLARITY_WORDS


def _unit_vectors(entries: Sequence[ArchivalEntry]) -> dict[int, np.ndarray]:
    """Stored vectors of the entries whose vector is of their current text."""
    fresh = [
        e.pk
        for e in entries
        if e.embedding_state == EmbeddingState.READY
        and e.embedded_hash == e.content_hash
    ]
    vectors = index_vectors(ARCHIVAL_INDEX, row_ids=fresh)
    unit: dict[int, np.ndarray] = {}
    for pk, vector in vectors.items():
        norm = float(np.linalg.norm(vector))
        if norm > 0:
            unit[pk] = vector / norm
    return unit


def _kept_apart(entries: Sequence[ArchivalEntry]) -> set[frozenset[int]]:
    """Pairs the partner separated by restoring one from the other."""
    return {
        frozenset((e.pk, event["entry_id"]))
        for e in entries
        for event in e.history
        if event.get("event") == "restored" and event.get("entry_id")
    }


def similar_pairs(
    entries: Sequence[ArchivalEntry], *, threshold: float
) -> list[tuple[float, int, int]]:
    """(similarity, newer id, older id), most similar first: vectors whose
    cosine exceeds ``threshold``, and texts equal but for case, spacing and
    the punctuation around words (similarity 1.0) whether embedded or not."""
    pairs: dict[tuple[int, int], float] = {}
    by_text: dict[str, list[int]] = {}
    for entry in entries:
        by_text.setdefault(_normalised(entry.content), []).append(entry.pk)
    for ids in by_text.values():
        ids.sort()
        for i, older in enumerate(ids):
            for newer in ids[i + 1 :]:
                pairs[(newer, older)] = 1.0
    unit = _unit_vectors(entries)
    if len(unit) > 1:
        ids = sorted(unit)
        matrix = np.stack([unit[pk] for pk in ids])
        # Row blocks keep the similarity matrix small for large scopes.
        for start in range(0, len(ids), 512):
            block = matrix[start : start + 512] @ matrix.T
            rows, cols = np.nonzero(block > threshold)
            for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
                a, b = ids[start + r], ids[c]
                if a > b:
                    key = (a, b)
                    pairs[key] = max(pairs.get(key, 0.0), float(block[r, c]))
    return sorted(
        ((sim, new, old) for (new, old), sim in pairs.items()),
        key=lambda t: (-t[0], t[1], t[2]),
    )


def _rule_decisions(
    pairs: Sequence[tuple[float, int, int]], texts: dict[int, str]
) -> list[Decision]:
    """Pairs past ``DEDUP_COSINE`` where one text adds nothing to the other."""
    return [
        Decision(event="NONE", new=new, old=old)
        for sim, new, old in pairs
        if sim > DEDUP_COSINE
        and (
            says_no_more(texts[new], than=texts[old])
            or says_no_more(texts[old], than=texts[new])
        )
    ]


def llm_decision_parse(answer: Any, *, new: int, candidates: Sequence[int]) -> Decision:
    """The model's answer as a ``Decision``; ``ValueError`` when it is not
    the shape asked for."""
    if not isinstance(answer, dict):
        raise ValueError("the answer is not a JSON object")
    event = answer.get("event")
    if event not in LLM_EVENTS:
        raise ValueError(f"event {event!r} is not one of {', '.join(LLM_EVENTS)}")
    if event == "ADD":
        return Decision(event="ADD", new=new)
    old = answer.get("id")
    if isinstance(old, str) and old.isdigit():
        old = int(old)
    if not isinstance(old, int) or old not in candidates:
        raise ValueError(f"id {old!r} is not one of the memories given")
    text = answer.get("text")
    if event == "UPDATE":
        if not isinstance(text, str) or not text.strip():
            raise ValueError("UPDATE needs the combined text")
        if len(text) > ARCHIVAL_MAX_CHARS:
            raise ValueError("the combined text is too long")
        return Decision(event="UPDATE", new=new, old=old, text=text.strip())
    return Decision(event=event, new=new, old=old)


def _llm_decisions(
    scope: _Scope, pairs: Sequence[tuple[float, int, int]], client: Any
) -> list[Decision]:
    """One question per newer entry with close older neighbours; a failed
    call or an invalid answer leaves that entry to the rules."""
    by_id = {e.pk: e for e in scope.entries}
    neighbours: dict[int, list[tuple[float, int]]] = {}
    for sim, new, old in pairs:
        neighbours.setdefault(new, []).append((sim, old))
    decisions: list[Decision] = []
    for new, close in sorted(neighbours.items()):
        close = close[:LLM_MAX_CANDIDATES]
        candidates = [old for _sim, old in close]
        question = {
            "new_fact": {"id": new, "text": by_id[new].content},
            "memories": [{"id": old, "text": by_id[old].content} for old in candidates],
        }
        try:
            completion = client.complete(
                constellation_id=scope.constellation.pk,
                messages=[
                    {"role": "system", "content": LLM_INSTRUCTIONS},
                    {"role": "user", "content": json.dumps(question)},
                ],
                json_output=True,
            )
            decisions.append(
                llm_decision_parse(
                    json.loads(completion.text), new=new, candidates=candidates
                )
            )
        except (ValueError, ApplicationError) as exc:  # LLMUnavailable, budget
            logger.info("consolidation: rules decide for entry %s (%s)", new, exc)
            decisions += _rule_decisions(
                [(sim, new, old) for sim, old in close],
                {pk: by_id[pk].content for pk in (new, *candidates)},
            )
    return decisions


def _survivor_first(
    a: ArchivalEntry, b: ArchivalEntry
) -> tuple[ArchivalEntry, ArchivalEntry]:
    """(kept, merged) of two duplicates: the one that says more when the
    other adds nothing to it, then a long-term entry over a short-term one,
    else the older, whose id others may already refer to (the kept entry
    takes the other's uses and lifetime, so no relevance is lost)."""
    a_more = says_no_more(b.content, than=a.content)
    b_more = says_no_more(a.content, than=b.content)
    if a_more != b_more:
        return (a, b) if a_more else (b, a)

    def rank(e: ArchivalEntry) -> tuple[bool, int]:
        return (e.lifetime == ArchivalLifetime.LONG_TERM, -e.pk)

    return (a, b) if rank(a) >= rank(b) else (b, a)


def _merge(
    *, kept: ArchivalEntry, merged: ArchivalEntry, reason: str, at: datetime
) -> None:
    """``merged`` is superseded by ``kept``, which notes it in its history;
    a duplicate also hands over its uses and tags (a contradicted entry's
    are not evidence for the entry that replaces it)."""
    if reason == SupersededReason.MERGED:
        kept.access_count += merged.access_count
        kept.importance = max(kept.importance, merged.importance)
        kept.tags = list(dict.fromkeys([*kept.tags, *merged.tags]))[:MAX_TAGS]
        if merged.lifetime == ArchivalLifetime.LONG_TERM:
            kept.lifetime = ArchivalLifetime.LONG_TERM
    kept.history = [
        *kept.history,
        history_event(event=reason, text=merged.content, entry_id=merged.pk, at=at),
    ]
    kept.save(
        update_fields=["access_count", "importance", "tags", "lifetime", "history"]
    )
    archival_entry_supersede(entry=merged, reason=reason, by=kept, at=at)


def _apply(
    decision: Decision,
    *,
    live: dict[int, ArchivalEntry],
    counts: _Counts,
    at: datetime,
) -> None:
    new = live.get(decision.new)
    old = live.get(decision.old) if decision.old is not None else None
    if decision.event == "ADD" or new is None or old is None:
        return  # distinct, or one of them was merged earlier in this run
    if decision.event == "DELETE":
        _merge(kept=new, merged=old, reason=SupersededReason.CONTRADICTED, at=at)
        live.pop(old.pk)
        counts.contradicted += 1
        return
    if decision.event == "UPDATE":
        old.history = [
            *old.history,
            history_event(event="updated", text=old.content, at=at),
        ]
        old.save(update_fields=["history"])
        archival_entry_update(entry=old, content=decision.text)
        kept, merged = old, new
    else:
        kept, merged = _survivor_first(new, old)
    _merge(kept=kept, merged=merged, reason=SupersededReason.MERGED, at=at)
    live.pop(merged.pk)
    counts.merged += 1


def archival_consolidate(
    *,
    agent: Agent | None = None,
    constellation: Constellation | None = None,
    now: datetime | None = None,
) -> ConsolidationRun:
    """Consolidate an agent's own entries (``agent``) or a constellation's
    constellation-tier entries (``constellation`` alone)."""
    if (agent is None) == (constellation is None):
        raise InvalidInput("consolidate either an agent or a constellation")
    if agent is not None:
        constellation = agent.constellation
    assert constellation is not None
    started = timezone.now()
    now = now or started
    config = retrieval_config_for(constellation=constellation)
    scope = _Scope(
        constellation=constellation,
        agent=agent,
        decay=tier_decay(config, now=now),
        cap=config.archival_cap,
        entries=list(_scope_rows(constellation=constellation, agent=agent)),
    )
    client = chat_client()
    threshold = DEDUP_COSINE if client is None else LLM_CANDIDATE_COSINE
    apart = _kept_apart(scope.entries)
    pairs = [
        pair
        for pair in similar_pairs(scope.entries, threshold=threshold)
        if frozenset(pair[1:]) not in apart
    ]
    if client is None:
        texts = {e.pk: e.content for e in scope.entries}
        decisions = _rule_decisions(pairs, texts)
    else:
        decisions = _llm_decisions(scope, pairs, client)
    return _consolidate_apply(
        scope,
        decisions=decisions,
        seen={e.pk: e.content_hash for e in scope.entries},
        decided_by="llm" if client is not None else "rules",
        started=started,
    )


@transaction.atomic
def _consolidate_apply(
    scope: _Scope,
    *,
    decisions: Sequence[Decision],
    seen: dict[int, str],
    decided_by: str,
    started: datetime,
) -> ConsolidationRun:
    at = timezone.now()
    rows = _scope_rows(constellation=scope.constellation, agent=scope.agent)
    live = {e.pk: e for e in rows.select_for_update().order_by("pk")}
    relevance = {pk: scope.decay.relevance(e) for pk, e in live.items()}
    counts = _Counts(scored=len(live))
    for entry in live.values():
        if (
            entry.lifetime == ArchivalLifetime.SHORT_TERM
            and relevance[entry.pk] > PROMOTE_RELEVANCE
            and entry.access_count > PROMOTE_ACCESSES
        ):
            entry.lifetime = ArchivalLifetime.LONG_TERM
            entry.save(update_fields=["lifetime"])
            counts.promoted += 1
    for decision in decisions:
        # An entry edited since the question was asked is left for next run.
        ids = [decision.new, decision.old]
        if any(pk is not None and live.get(pk) is None for pk in ids) or any(
            pk is not None and live[pk].content_hash != seen.get(pk) for pk in ids
        ):
            continue
        _apply(decision, live=live, counts=counts, at=at)
    for entry in list(live.values()):
        if (
            entry.lifetime != ArchivalLifetime.LONG_TERM
            and relevance[entry.pk] < PRUNE_FLOOR
        ):
            archival_entry_supersede(entry=entry, reason=SupersededReason.PRUNED, at=at)
            live.pop(entry.pk)
            counts.pruned += 1
    over = len(live) - scope.cap
    if over > 0:
        weakest = sorted(
            live.values(),
            key=lambda e: (
                e.lifetime == ArchivalLifetime.LONG_TERM,
                relevance[e.pk],
                e.pk,
            ),
        )[:over]
        for entry in weakest:
            archival_entry_supersede(entry=entry, reason=SupersededReason.CAPPED, at=at)
            counts.capped += 1
    run = ConsolidationRun.objects.create(
        constellation=scope.constellation,
        agent=scope.agent,
        started_at=started,
        finished_at=timezone.now(),
        decided_by=decided_by,
        **asdict(counts),
    )
    # A run that changed nothing is not news: every scope is consolidated
    # several times a day, and quiet runs would crowd the stream out.
    changed = asdict(counts)
    del changed["scored"]
    if any(changed.values()):
        event_record(
            actor=Actor.system(),
            agent=scope.agent,
            constellation_id=scope.constellation.pk,
            event_type=EventType.CONSOLIDATION_RUN,
            details={"run_id": run.pk, **asdict(counts)},
        )
    return run


def archival_consolidation_due(
    *, every: timedelta, now: datetime | None = None
) -> list[dict[str, Any]]:
    """Scopes not consolidated within ``every``, as keyword arguments of
    ``archival_consolidate``: each active agent, and each constellation."""
    since = (now or timezone.now()) - every
    recent = ConsolidationRun.objects.filter(finished_at__gte=since)
    done_agents = set(
        recent.filter(agent__isnull=False).values_list("agent_id", flat=True)
    )
    done_constellations = set(
        recent.filter(agent__isnull=True).values_list("constellation_id", flat=True)
    )
    scopes: list[dict[str, Any]] = [
        {"agent": agent}
        for agent in Agent.objects.filter(is_active=True)
        .exclude(pk__in=done_agents)
        .select_related("constellation")
        .order_by("pk")
    ]
    scopes += [
        {"constellation": constellation}
        for constellation in Constellation.objects.exclude(
            pk__in=done_constellations
        ).order_by("pk")
    ]
    return scopes


def archival_consolidate_due(*, every: timedelta) -> list[int]:
    """Consolidate every scope not consolidated within ``every``; the ids
    of the runs made.  Missed schedules (the site was down) therefore come
    to one run per scope, whenever this runs next.  A failure in one scope
    is logged and the rest go on: consolidation is best effort and the
    scope stays due."""
    runs: list[int] = []
    for scope in archival_consolidation_due(every=every):
        try:
            runs.append(archival_consolidate(**scope).pk)
        except Exception:
            logger.exception("consolidation of %s failed", scope)
    return runs
