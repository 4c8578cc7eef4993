"""The search tool's ``blocks`` domain: the memory blocks a caller can read
(``memory.blocks.permissions``), matched by the words of their rendered
text as the LLM sees it, now or, with ``as_of``, as they were at that time.

Blocks have no search index of their own (their text changes with every
edit, and a caller reads a few dozen to a few hundred): their texts are
ranked by ``memory.search.engine.words_search``.  A hit names the block's
label and the number of the version searched.
"""

from dataclasses import replace
from typing import Any

from memory.blocks.selectors import (
    BlockText,
    block_list_for_actor,
    block_texts_at,
    block_version_numbers,
)
from memory.longterm.domains import DomainQuery, word_outcome
from memory.search.engine import Hit, SearchOutcome, words_search

# A block's time is that of the version searched.
BLOCK_FILTERS = frozenset({"agent_id", "since", "until"})


def blocks_domain_search(query: DomainQuery) -> SearchOutcome:
    if query.filters.beyond(BLOCK_FILTERS):
        return word_outcome([], mode=query.mode, what="memory blocks")
    filters = query.filters
    blocks = block_list_for_actor(actor=query.actor, agent_id=filters.agent_id)
    texts = [
        found
        for found in block_texts_at(
            blocks=list(blocks.filter(constellation_id=query.constellation.pk)),
            moment=query.as_of,
        )
        if (filters.since is None or found.created_at >= filters.since)
        and (filters.until is None or found.created_at <= filters.until)
    ]
    folded = [found for found in texts if found.folded]
    texts = [found for found in texts if not found.folded]
    hits = words_search(
        ((found, found.text) for found in texts),
        text=query.text,
        limit=query.limit,
        fusion=query.fusion,
        rerank=query.rerank,
    )
    numbers = block_version_numbers(
        versions={hit.row.block.pk: hit.row.version_id for hit in hits}
    )
    for hit in hits:
        hit.row = replace(hit.row, number=numbers[hit.row.block.pk])
    outcome = word_outcome(hits, mode=query.mode, what="memory blocks")
    if folded:
        outcome.degraded = "; ".join(
            filter(None, [outcome.degraded, _folded_note(folded)])
        )
    return outcome


def _folded_note(folded: list[BlockText]) -> str:
    """What an ``as_of`` before blocks' held history could not search."""
    return "not searched as of that time, their history then was folded: " + (
        ", ".join(
            f"block {found.block.label!r} (content kept from "
            f"{found.held_since:%Y-%m-%d %H:%M} UTC)"
            if found.held_since is not None
            else f"block {found.block.label!r}"
            for found in folded
        )
    )


def block_hit_payload(hit: Hit) -> dict[str, Any]:
    found: BlockText = hit.row
    block = found.block
    owner = block.owner.name if block.owner_id is not None else None
    return {
        "id": str(block.pk),
        "block_id": str(block.pk),
        "label": block.label,
        "version": found.number,
        "agent_id": block.owner_id,
        "agent_name": owner,
        "content": found.text,
        "created_at": found.created_at,
        "provenance": {
            "store": "block",
            "block_id": str(block.pk),
            "label": block.label,
            "version": found.number,
            "owner": owner or "constellation",
            "block_type": block.block_type,
        },
    }
