"""Every change to memory blocks.

One path changes a block's content, :func:`_block_change`: under the block's
row lock it loads the document (snapshot + log), applies the change, checks
the actor's rights (``memory.blocks.permissions``), that the change wrote
only to the containers of the block's schema, the character limit on
everything the result holds and the byte cap on the document's current
state (``settings.MEMORY_BLOCK_MAX_BYTES``; history does not count), appends one
attributed ``BlockUpdate`` and compacts the log past the thresholds of
``settings.MEMORY_COMPACT_UPDATES`` / ``MEMORY_COMPACT_BYTES`` - all in
one transaction, so a concurrent change can never be lost.  After commit
the update is broadcast to the block's room (``memory.blocks.sync.broadcast``).

Agents' changes to Partner/Human blocks become approval requests; approving
one applies it as the agent's change.  Services are keyword-only, typed and
atomic.

Modules by concern, each importing only those before it: ``rules`` (the
checks, :class:`BlockChange`), ``events`` (activity), ``storage`` (snapshot,
log, bursts, compaction), ``change`` (the one path, approval requests
included), ``operations``, ``approvals``, ``versions`` (rollback,
compaction), ``text``, ``create``, ``configure`` and ``sharing``.  The
services and :class:`BlockChange` are re-exported here.
"""

from memory.blocks.services.approvals import approval_decide
from memory.blocks.services.configure import (
    block_configure,
    block_delete,
    block_move,
    block_rename,
    block_swap,
)
from memory.blocks.services.create import block_create
from memory.blocks.services.operations import (
    block_log_append,
    block_operate,
    block_set_content,
    block_update_import,
)
from memory.blocks.services.rules import BlockChange
from memory.blocks.services.sharing import block_share, block_unshare
from memory.blocks.services.storage import log_entries_pruned
from memory.blocks.services.text import (
    block_append,
    block_insert,
    block_replace,
    block_rewrite,
)
from memory.blocks.services.versions import block_compact, block_rollback

__all__ = [
    "BlockChange",
    "approval_decide",
    "block_append",
    "block_compact",
    "block_configure",
    "block_create",
    "block_delete",
    "block_insert",
    "block_log_append",
    "block_move",
    "block_operate",
    "block_rename",
    "block_replace",
    "block_rewrite",
    "block_rollback",
    "block_set_content",
    "block_share",
    "block_swap",
    "block_unshare",
    "block_update_import",
    "log_entries_pruned",
]
