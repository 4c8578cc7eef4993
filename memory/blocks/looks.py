"""What changed since a person last looked, on a block's page and on the
constellation's page, and recording their looks (``BlockLook``).

Changes are versions (``BlockUpdate`` rows) by anyone else than the person:
on a block's page, the versions after the newest one they saw there; on the
constellation's page, the versions written since their last visit to it,
per block they may read.  A first visit has nothing to compare with and
shows nothing; every visit moves the look to now.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Max, Q, QuerySet
from django.utils import timezone

from memory.blocks.models import BlockLook, BlockUpdate, MemoryBlock
from memory.blocks.selectors import block_list_for_actor
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Constellation

# Versions listed at most on a block's page (the newest); older ones counted.
CHANGES_SHOWN = 10
# Blocks listed at most on the constellation's page (most recently changed).
BLOCKS_SHOWN = 12


@dataclass(frozen=True)
class SeenVersion:
    """A version with its number in the block's history (1 = its first)."""

    number: int
    update: BlockUpdate


@dataclass(frozen=True)
class BlockSinceLook:
    """A block's versions by others since the person's last look there."""

    looked_at: datetime
    changes: list[SeenVersion]
    earlier: int
    # The version the person saw last: the comparison starts from it.
    seen_number: int


@dataclass(frozen=True)
class ChangedBlock:
    block: MemoryBlock
    changes: int
    by: list[str]
    last_at: datetime


@dataclass(frozen=True)
class ConstellationSinceLook:
    looked_at: datetime
    blocks: list[ChangedBlock]
    more: int


def _by_others(user: AbstractBaseUser) -> Q:
    return ~Q(actor_kind="human", actor_id=str(user.pk))


def block_since_look(
    *, user: AbstractBaseUser, block: MemoryBlock
) -> BlockSinceLook | None:
    """Others' versions of ``block`` since ``user`` last opened its page;
    None at a first visit."""
    look = BlockLook.objects.filter(user=user, block=block).first()
    if look is None:
        return None
    seen_number = BlockUpdate.objects.filter(block=block, pk__lte=look.upto).count()
    newer = list(
        BlockUpdate.objects.filter(block=block, pk__gt=look.upto)
        .only("pk", "actor_kind", "actor_id", "actor_name", "summary", "created_at")
        .order_by("pk")
    )
    others = [
        SeenVersion(number=seen_number + n, update=u)
        for n, u in enumerate(newer, start=1)
        if not (u.actor_kind == "human" and u.actor_id == str(user.pk))
    ]
    shown = others[-CHANGES_SHOWN:]
    return BlockSinceLook(
        looked_at=look.seen_at,
        changes=shown,
        earlier=len(others) - len(shown),
        seen_number=seen_number,
    )


def block_look_record(*, user: AbstractBaseUser, block: MemoryBlock) -> None:
    """``user`` has seen ``block`` as it is now."""
    upto = (
        BlockUpdate.objects.filter(block=block).aggregate(upto=Max("pk"))["upto"] or 0
    )
    BlockLook.objects.update_or_create(
        user=user,
        block=block,
        defaults={
            "constellation_id": block.constellation_id,
            "upto": upto,
            "seen_at": timezone.now(),
        },
    )


def constellation_since_look(
    *, user: AbstractBaseUser, constellation: Constellation
) -> ConstellationSinceLook | None:
    """The blocks ``user`` may read that others changed since their last
    visit to the constellation's page; None at a first visit."""
    look = BlockLook.objects.filter(
        user=user, constellation=constellation, block__isnull=True
    ).first()
    if look is None:
        return None
    readable: QuerySet[MemoryBlock] = block_list_for_actor(
        actor=Actor.for_user(user)
    ).filter(constellation=constellation)
    rows = (
        BlockUpdate.objects.filter(
            block__in=readable.values("pk"), created_at__gt=look.seen_at
        )
        .filter(_by_others(user))
        .values("block_id")
        .annotate(n=Count("pk"), last=Max("created_at"))
        .order_by("-last")
    )
    rows = list(rows)
    shown = rows[:BLOCKS_SHOWN]
    blocks = MemoryBlock.objects.select_related("owner").in_bulk(
        [r["block_id"] for r in shown]
    )
    names: dict[object, list[str]] = {}
    for block_id, kind, name in (
        BlockUpdate.objects.filter(
            block_id__in=list(blocks), created_at__gt=look.seen_at
        )
        .filter(_by_others(user))
        .values_list("block_id", "actor_kind", "actor_name")
        .distinct()
    ):
        names.setdefault(block_id, []).append("System" if kind == "system" else name)
    return ConstellationSinceLook(
        looked_at=look.seen_at,
        blocks=[
            ChangedBlock(
                block=blocks[r["block_id"]],
                changes=r["n"],
                by=sorted(set(names.get(r["block_id"], []))),
                last_at=r["last"],
            )
            for r in shown
            if r["block_id"] in blocks
        ],
        more=max(0, len(rows) - len(shown)),
    )


def constellation_look_record(
    *, user: AbstractBaseUser, constellation: Constellation
) -> None:
    """``user`` has seen the constellation's page now."""
    BlockLook.objects.update_or_create(
        user=user,
        constellation=constellation,
        block=None,
        defaults={"seen_at": timezone.now()},
    )
