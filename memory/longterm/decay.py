"""Relevance of archival entries with a decay rate per tier.

The formula is the engine's re-rank (``Rerank.relevance``); only the hourly
rate depends on the entry's tier, taken from the constellation's retrieval
config.  Consolidation always scores with it; search does when the
constellation enables the re-rank or the caller asks for decay.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memory.longterm.models import ArchivalTier, RetrievalConfig
from memory.search.engine import Rerank


@dataclass(frozen=True)
class TierDecay(Rerank):
    """``decay_rate`` applies to rows without a tier (messages, other
    domains' rows); an archival entry decays at its tier's rate."""

    rates: dict[str, float] = field(default_factory=dict)

    def relevance(self, row: Any) -> float:
        rate = self.rates.get(getattr(row, "tier", ""), self.decay_rate)
        return Rerank(decay_rate=rate, now=self.now).relevance(row)

    def describe(self) -> str:
        rates = ", ".join(f"{tier} {rate:g}" for tier, rate in self.rates.items())
        return f"importance, recency (decay per hour: {rates}), use"


def tier_decay(config: RetrievalConfig, *, now: datetime) -> TierDecay:
    return TierDecay(
        decay_rate=config.decay_rate,
        now=now,
        rates={
            ArchivalTier.CONVERSATION: config.conversation_decay_rate,
            ArchivalTier.AGENT: config.decay_rate,
            ArchivalTier.CONSTELLATION: config.constellation_decay_rate,
        },
    )
