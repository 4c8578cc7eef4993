"""Memory blocks (Loro documents), their update log, sharing and approvals.

A block's content is its Loro snapshot (``BlockSnapshot``) plus the
``BlockUpdate`` rows after ``snapshot_upto``.  Update rows are never deleted:
compaction folds their bytes into the snapshot and empties ``data``, and the
rows stay as the block's history (who, when, what, size, version).
"""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from pattern_site.kernel.agents.models import Agent, Constellation


class BlockType(models.TextChoices):
    CORE = "core", "Core"
    WORKING = "working", "Working"
    ARCHIVAL = "archival", "Archival"
    LOG = "log", "Log"


class Permission(models.TextChoices):
    """The permission table (what an agent may do with the block)."""

    READ_ONLY = "read_only", "ReadOnly"
    PARTNER = "partner", "Partner"
    HUMAN = "human", "Human"
    APPEND = "append", "Append"
    READ_WRITE = "read_write", "ReadWrite"
    ADMIN = "admin", "Admin"


class SharedAccess(models.TextChoices):
    READ_ONLY = "read_only", "ReadOnly"
    APPEND_ONLY = "append_only", "AppendOnly"
    READ_WRITE = "read_write", "ReadWrite"


class MemoryBlock(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    constellation = models.ForeignKey(
        Constellation, on_delete=models.CASCADE, related_name="memory_blocks"
    )
    owner = models.ForeignKey(
        Agent,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="memory_blocks",
        help_text="Empty for a constellation-level block.",
    )
    label = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    block_type = models.CharField(
        max_length=16, choices=BlockType.choices, default=BlockType.WORKING
    )
    schema = models.JSONField(default=dict)
    char_limit = models.PositiveIntegerField(default=5000)
    permission = models.CharField(
        max_length=16, choices=Permission.choices, default=Permission.READ_WRITE
    )
    pinned = models.BooleanField(default=False)
    snapshot_upto = models.BigIntegerField(
        default=0, help_text="Id of the last update folded into the snapshot."
    )
    history_from = models.BigIntegerField(
        default=0,
        help_text="Id of the oldest version whose content is held (0: the "
        "whole history): history retention folded the content of every "
        "version before it.  The stored document is then a shallow one "
        "starting at that version.",
    )
    version = models.BigIntegerField(
        default=0,
        help_text="Bumped by every content change, in its transaction; a cached "
        "document is used only while it matches.",
    )
    log_count = models.PositiveIntegerField(
        default=0, help_text="Updates stored after the snapshot."
    )
    log_bytes = models.PositiveBigIntegerField(
        default=0, help_text="Bytes of the updates stored after the snapshot."
    )
    rendered = models.TextField(blank=True, help_text="Content as the LLM sees it.")
    size = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["label"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "label"],
                condition=Q(owner__isnull=False),
                name="block_label_unique_per_owner",
            ),
            models.UniqueConstraint(
                fields=["constellation", "label"],
                condition=Q(owner__isnull=True),
                name="block_label_unique_per_constellation",
            ),
        ]

    def __str__(self) -> str:
        return self.label

    @property
    def is_constellation_level(self) -> bool:
        return self.owner_id is None


class BlockSnapshot(models.Model):
    """A block's Loro snapshot, in a row of its own.

    SQLite rewrites a whole row on every UPDATE, and the block's row changes
    with every edit: with a ~50 KB snapshot inline, each one-line append
    wrote a dozen overflow pages.
    This row changes only when the log is compacted.
    """

    block = models.OneToOneField(
        MemoryBlock,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="snapshot_row",
    )
    data = models.BinaryField(default=b"")

    def __str__(self) -> str:
        return f"snapshot of {self.block_id}"


class BlockPeer(models.Model):
    """A co-editing client that joined a block's room: the document version
    it joined with, which its edits may still build on.  History retention
    never folds past that version while the client is connected or was seen
    lately (``settings.MEMORY_HISTORY_PEER_HOURS``)."""

    block = models.ForeignKey(
        MemoryBlock, on_delete=models.CASCADE, related_name="sync_peers"
    )
    socket = models.CharField(max_length=200, help_text="The socket's channel name.")
    version = models.BinaryField(help_text="Loro version vector the client held.")
    seen_at = models.DateTimeField(help_text="When it joined, then when it left.")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["block", "socket"], name="block_peer_once_per_socket"
            )
        ]

    def __str__(self) -> str:
        return f"{self.socket} on {self.block_id}"


class BlockUpdate(models.Model):
    """One change of a block: a Loro update, who made it and why."""

    # No index of its own: ``block_update_seq`` (block, id) serves every
    # lookup by block, and each index is one more page written per edit.
    block = models.ForeignKey(
        MemoryBlock, on_delete=models.CASCADE, related_name="updates", db_index=False
    )
    data = models.BinaryField(help_text="Loro update bytes; empty once compacted.")
    frontiers = models.BinaryField(help_text="Document version after this change.")
    actor_kind = models.CharField(max_length=8)
    actor_id = models.CharField(max_length=64)
    actor_name = models.CharField(max_length=150)
    summary = models.CharField(max_length=300)
    size = models.PositiveIntegerField(help_text="Rendered size after the change.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["block", "id"], name="block_update_seq")]

    def __str__(self) -> str:
        return f"{self.block_id}#{self.pk} by {self.actor_kind}:{self.actor_id}"


class BlockAttachment(models.Model):
    """A block shared with an agent that does not own it."""

    block = models.ForeignKey(
        MemoryBlock, on_delete=models.CASCADE, related_name="attachments"
    )
    agent = models.ForeignKey(
        Agent, on_delete=models.CASCADE, related_name="block_attachments"
    )
    access = models.CharField(max_length=16, choices=SharedAccess.choices)
    attached_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["block", "agent"], name="block_attached_once_per_agent"
            )
        ]

    def __str__(self) -> str:
        return f"{self.block_id} -> {self.agent_id} ({self.access})"


class ApprovalStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    FAILED = "failed", "Failed"


class BlockApproval(models.Model):
    """An agent's change to a Partner/Human block, waiting for a human."""

    block = models.ForeignKey(
        MemoryBlock, on_delete=models.CASCADE, related_name="approvals"
    )
    agent = models.ForeignKey(
        Agent, on_delete=models.CASCADE, related_name="block_approvals"
    )
    operations = models.JSONField()
    summary = models.CharField(max_length=300)
    status = models.CharField(
        max_length=16, choices=ApprovalStatus.choices, default=ApprovalStatus.PENDING
    )
    decided_by = models.CharField(max_length=150, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    result = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["block", "status"], name="approval_status")]

    def __str__(self) -> str:
        return f"{self.agent_id} on {self.block_id}: {self.status}"


class BlockSeen(models.Model):
    """The version of a block an agent last received (a tool read, its
    built context, the changes it asked for): what "changes since you last
    looked" starts from.  One row per agent and block, rewritten in place."""

    agent = models.ForeignKey(
        Agent, on_delete=models.CASCADE, related_name="blocks_seen", db_index=False
    )
    block = models.ForeignKey(
        MemoryBlock, on_delete=models.CASCADE, related_name="seen_by"
    )
    upto = models.BigIntegerField(
        help_text="Id of the newest version (BlockUpdate) the agent had seen."
    )
    frontiers = models.BinaryField(
        help_text="Document version the agent received (Loro frontiers); the "
        "newest version may have grown past it since (a burst of live edits)."
    )
    version = models.BigIntegerField(
        help_text="The block's ``version`` counter then: unchanged means nothing "
        "new, answered without reading the history."
    )
    seen_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["agent", "block"], name="block_seen_once_per_agent"
            )
        ]

    def __str__(self) -> str:
        return f"{self.agent_id} saw {self.block_id}@{self.upto}"


class BlockLook(models.Model):
    """Where a person last looked: at a block (its page, ``upto`` its newest
    version then) or, with no block, at the constellation's page.  What
    "since you last looked" on those pages starts from; one row per person
    and place, rewritten on each visit."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="block_looks"
    )
    constellation = models.ForeignKey(
        Constellation, on_delete=models.CASCADE, related_name="+"
    )
    block = models.ForeignKey(
        MemoryBlock,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="looks",
    )
    upto = models.BigIntegerField(
        default=0, help_text="Id of the block's newest version (BlockUpdate) then."
    )
    seen_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user", "block"],
                condition=Q(block__isnull=False),
                name="block_look_once_per_person",
            ),
            models.UniqueConstraint(
                fields=["user", "constellation"],
                condition=Q(block__isnull=True),
                name="constellation_look_once_per_person",
            ),
        ]

    def __str__(self) -> str:
        return f"look of {self.user_id} at {self.block_id or self.constellation_id}"
