"""Request and response shapes of the memory block tools and resources."""

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from ninja import Field, Schema

# The tools' descriptions, written for the model that calls them: the HTTP
# endpoints' OpenAPI descriptions and the MCP tool descriptions alike.
CONTEXT_TOOL = """Manage your Core and Working memory blocks (always or usually in
your context).
- append: add `content` to block `label` (a new line of text, or a new list
  item). Use it to build up what you know incrementally.
- replace: find the exact text `old` in block `label` and put `new` in its
  place. Fails, changing nothing, when `old` is not in the block.
- archive: move working block `label` to archival memory (frees context space).
- load: bring archival block `label` into working memory.
- swap: archive working block `label` and load `archival_label` in one step.
Blocks have a character limit; an error tells you the size, the limit and how
much your change adds. Blocks with Partner or Human permission queue your
change for a human's approval."""


CORE_MEMORY_UPDATE = """Update your core memory blocks (persona, human, etc.).
Use this to modify persistent information about yourself or the person you're
talking to. Changes are immediately reflected in your context."""


CORE_MEMORY_APPEND = """Add content to an existing core memory block without
replacing it. Useful for incrementally building up information."""


CORE_MEMORY_REPLACE = """Replace the exact text `old_content` in core memory block
`label` with `new_content`. Fails, changing nothing, when `old_content` is not
in the block. To delete text, give an empty `new_content`."""


class BlockSummaryOut(Schema):
    id: UUID
    label: str
    description: str
    block_type: str
    permission: str
    access: str = Field(description="Your effective right: read, append or write.")
    approval_required: bool
    owner_id: int | None
    owner: str | None
    shared_from: str | None
    pinned: bool
    size: int
    char_limit: int
    updated_at: datetime


class BlockOut(BlockSummaryOut):
    schema_: dict[str, Any] = Field(alias="schema")
    rendered: str
    content: Any = Field(description="Structured content, shaped by the schema.")


class BlockCreateIn(Schema):
    label: str = Field(min_length=1, max_length=100)
    agent_id: int | None = Field(
        None, description="Owner; agents may omit it (themselves)."
    )
    constellation_id: int | None = Field(
        None, description="For a constellation-level block (humans only)."
    )
    template: (
        Literal["persona", "human", "scratchpad", "organization", "custom"] | None
    ) = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    description: str | None = None
    block_type: Literal["core", "working", "archival", "log"] | None = None
    permission: Literal[
        "read_only", "partner", "human", "append", "read_write", "admin"
    ] = "read_write"
    char_limit: int | None = Field(None, gt=0, le=1_000_000)
    pinned: bool = False
    content: Any = None


class BlockPatchIn(Schema):
    description: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    permission: (
        Literal["read_only", "partner", "human", "append", "read_write", "admin"] | None
    ) = None
    pinned: bool | None = None
    block_type: Literal["core", "working", "archival", "log"] | None = None
    char_limit: int | None = Field(None, gt=0, le=1_000_000)


class OperationsIn(Schema):
    operations: list[dict[str, Any]] = Field(
        min_length=1,
        description=(
            "Schema operations, e.g. {'op': 'append_text', 'text': '...'}, "
            "{'op': 'set_field', 'field': 'mood', 'value': 'calm'}, "
            "{'op': 'push_item', 'item': '...'}; composite blocks add 'section'."
        ),
    )
    summary: str | None = Field(None, max_length=300)


class ChangeOut(Schema):
    status: Literal["applied", "unchanged", "pending_approval", "moved"]
    message: str
    block_id: UUID
    label: str
    size: int
    char_limit: int
    version_id: int | None = None
    approval_id: int | None = None


class VersionOut(Schema):
    id: int
    created_at: datetime
    actor_kind: str
    actor_id: str
    actor_name: str
    summary: str
    size: int
    number: int | None = Field(None, description="With contains: the version's number.")
    contains: Literal["appeared", "disappeared"] | None = Field(
        None, description="With contains: whether the text appeared or disappeared."
    )


class VersionViewOut(Schema):
    version: VersionOut
    rendered: str
    content: Any


class DiffOut(Schema):
    kind: Literal["text", "fields"]
    unified: str | None = None
    changes: list[dict[str, Any]] | None = None


class RollbackIn(Schema):
    version_id: int


class ShareIn(Schema):
    agent_id: int
    access: Literal["read_only", "append_only", "read_write"]


class AttachmentOut(Schema):
    agent_id: int
    agent: str
    access: str
    attached_at: datetime


class ApprovalOut(Schema):
    id: int
    block_id: UUID
    label: str
    agent_id: int
    agent: str
    operations: list[dict[str, Any]]
    summary: str
    status: str
    decided_by: str
    decided_at: datetime | None
    result: str
    created_at: datetime


class DecisionIn(Schema):
    approve: bool


class ImportOut(Schema):
    created: list[BlockSummaryOut]


class ContextToolIn(Schema):
    operation: Literal["append", "replace", "archive", "load", "swap"]
    label: str = Field(description="The block to act on (for swap: the working one).")
    content: str | None = Field(None, description="append: the text to add.")
    old: str | None = Field(None, description="replace: the exact text to find.")
    new: str | None = Field(None, description="replace: its replacement.")
    section: str | None = Field(None, description="Section of a composite block.")
    archival_label: str | None = Field(
        None, description="swap: the archival block to bring into working memory."
    )


class CoreMemoryIn(Schema):
    label: str = Field(description='Which block: "persona", "human", ...')
    content: str


class CoreMemoryReplaceIn(Schema):
    label: str = Field(description='Which block: "persona", "human", ...')
    old_content: str = Field(description="The exact text to find.")
    new_content: str = Field(description="Its replacement.")


class BlameVersionOut(Schema):
    number: int
    id: int
    created_at: datetime
    actor_kind: str
    actor_id: str
    actor_name: str
    summary: str


class BlameSpanOut(Schema):
    start: int = Field(description="Offset of the span in its part, in characters.")
    text: str
    version: int | None = Field(
        description="Number of the version that inserted the span (see versions)."
    )


class BlamePartOut(Schema):
    name: str | None = Field(description="Composite section; null: the whole text.")
    spans: list[BlameSpanOut]


class BlameOut(Schema):
    parts: list[BlamePartOut]
    versions: list[BlameVersionOut] = Field(
        description="The versions the spans came from, oldest first."
    )


CHANGES_TOOL = """What changed in your memory blocks since you last looked, by
others (agents or humans): for every block you can read, each change with who
made it, when, its summary and a compact diff (text: inserted and deleted
spans; structured blocks: by field; lists: items added and removed).  Your
look then moves to now, so each change is told once; with `peek` it stays."""


class ChangesIn(Schema):
    peek: bool = Field(False, description="Look without moving your look.")
    labels: list[str] | None = Field(
        None, description="Only these blocks (default: every block you can read)."
    )


class SeenChangeOut(Schema):
    id: int = Field(description="The version (history row) of the change.")
    created_at: datetime
    actor_kind: str
    actor_id: str
    actor_name: str
    summary: str
    diff: dict[str, Any]


class BlockChangesOut(Schema):
    block_id: UUID
    label: str
    changes: list[SeenChangeOut] = Field(description="Oldest first.")
    earlier: int = Field(description="Older changes left out.")


class ChangesOut(Schema):
    blocks: list[BlockChangesOut]
    advanced: bool = Field(description="Whether your look moved to now.")
