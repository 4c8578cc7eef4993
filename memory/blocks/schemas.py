"""Request and response shapes of the memory block tools and resources."""

from datetime import datetime
from typing import Annotated, Any, Literal, Union
from uuid import UUID

from ninja import Field, Path, Schema
from pydantic import (
    ModelWrapValidatorHandler,
    PrivateAttr,
    RootModel,
    create_model,
    model_validator,
)

from memory.blocks import documents
from pattern_site.kernel.apitypes import (
    ITEMS_MAX,
    LINE_MAX,
    NAME_MAX,
    TEXT_MAX,
    DictSchema,
    Id,
    InputSchema,
    Label,
)
from pattern_site.kernel.errors import InvalidInput

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
- changes: what others (agents or humans) changed in the blocks you can read
  since you last looked: each change with who, when, its summary and a
  compact diff.  `labels` (or `label`) limits it to those blocks.  Your look
  then moves to now, so each change is told once; with `peek` it stays.
Blocks have a character limit; an error tells you the size, the limit and how
much your change adds. Blocks with Partner or Human permission queue your
change for the partner's approval."""


CORE_MEMORY_UPDATE = """Update your core memory blocks (persona, human, etc.).
Use this to modify persistent information about yourself or the person you're
talking to. Changes are immediately reflected in your context.  The block's
whole content becomes `content`; write a structured block the way you see it
in your context ('field: value' lines, '=== section ===' headings)."""


CORE_MEMORY_APPEND = """Add content to an existing core memory block without
replacing it. Useful for incrementally building up information.  On a
structured block it goes to `section` (a field or section), by default the
last one holding text."""


CORE_MEMORY_REPLACE = """Replace the exact text `old_content` in a core memory
block with `new_content`, every occurrence (empty to delete it).  Fails,
changing nothing, when the text is not in the block; on a structured block,
name the `section` when the text appears in more than one field."""


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


SCHEMA_EXAMPLE = {
    "kind": "map",
    "fields": [
        {"name": "mood", "type": "text"},
        {"name": "open_questions", "type": "list"},
    ],
}
TemplateChoice = Literal["persona", "human", "scratchpad", "organization", "custom"]
BlockTypeChoice = Literal["core", "working", "archival", "log"]
PermissionChoice = Literal[
    "read_only", "partner", "human", "append", "read_write", "admin"
]

# Text for a block: no block holds more than its char limit, at most TEXT_MAX.
BlockText = Annotated[str, Field(max_length=TEXT_MAX)]
# A section or field of a structured block ("section/field" on a composite).
SectionName = Annotated[str, Field(max_length=2 * NAME_MAX + 1)]
Description = Annotated[str, Field(max_length=LINE_MAX)]
# A block's label as a tool names it (checked against the blocks, not the rule).
LabelText = Annotated[str, Field(max_length=NAME_MAX)]
LabelPath = Annotated[str, Path(max_length=NAME_MAX)]


class BlockCreateIn(InputSchema):
    label: Label = Field(examples=["check_in"])
    agent_id: Id | None = Field(
        None, description="Owner; agents may omit it (themselves).", examples=[None]
    )
    constellation_id: Id | None = Field(
        None,
        description="For a constellation-level block (humans only).",
        examples=[None],
    )
    template: TemplateChoice | None = Field(
        None,
        description="Gives the schema, description and type unless given.",
        examples=[None],
    )
    schema_: dict[str, Any] | None = Field(
        None,
        alias="schema",
        description="kind text, map (fields), list, log or composite (sections).",
        examples=[SCHEMA_EXAMPLE],
    )
    description: Description | None = Field(
        None, examples=["How Sam feels this week and what is still open"]
    )
    block_type: BlockTypeChoice | None = Field(None, examples=["working"])
    permission: PermissionChoice = Field("read_write", examples=["read_write"])
    char_limit: int | None = Field(None, gt=0, le=TEXT_MAX, examples=[2000])
    pinned: bool = Field(False, examples=[True])
    content: Any = Field(
        None,
        description="Initial content, shaped by the schema.",
        examples=[{"mood": "calm", "open_questions": ["Dentist on Friday?"]}],
    )


class BlockPatchIn(InputSchema):
    description: Description | None = Field(None, examples=["Sam's week at a glance"])
    schema_: dict[str, Any] | None = Field(
        None, alias="schema", examples=[SCHEMA_EXAMPLE]
    )
    permission: PermissionChoice | None = Field(None, examples=["append"])
    pinned: bool | None = Field(None, examples=[False])
    block_type: BlockTypeChoice | None = Field(None, examples=["core"])
    char_limit: int | None = Field(None, gt=0, le=TEXT_MAX, examples=[4000])


_ARG_TYPES: dict[str, Any] = {
    "string": BlockText,
    "integer": int,
    "number": float,
    "boolean": bool,
    "object": dict[str, Any],
    "any": Any,
}

_ARG_EXAMPLES: dict[str, Any] = {
    "text": "Ask Sam about the dentist appointment.",
    "separator": "\n",
    "old": "Thursday",
    "new": "Friday",
    "field": "preferences",
    "value": "oat milk",
    "delta": 1,
    "item": "Book the dentist",
    "index": 0,
    "entry": {"message": "Checked in with Sam"},
    "all": False,
    "done": True,
    "once": False,
    "line": 0,
}


def _operation_model(name: str) -> type[Schema]:
    fields: dict[str, Any] = {
        "op": (Literal[name], Field(description="The operation.")),  # type: ignore[valid-type]
        "section": (
            SectionName | None,
            Field(
                None,
                description="Composite blocks: the section to change.",
                examples=[None],
            ),
        ),
    }
    for arg, (json_type, required) in documents.OPERATION_ARGS[name].items():
        annotation = _ARG_TYPES[json_type]
        example = Field(examples=[_ARG_EXAMPLES[arg]])
        if required:
            fields[arg] = (annotation, example)
        else:
            fields[arg] = (
                annotation | None,
                Field(None, examples=[_ARG_EXAMPLES[arg]]),
            )
    title = "".join(part.title() for part in name.split("_")) + "Op"
    return create_model(  # type: ignore[call-overload,no-any-return]
        title, __base__=_OperationBase, **fields
    )


class _OperationBase(InputSchema):
    @model_validator(mode="before")
    @classmethod
    def _arguments(cls, data: Any) -> Any:
        # The same check (and message, naming the arguments) as the services.
        if isinstance(data, dict):
            try:
                documents.operation_arguments_check(data)
            except InvalidInput as exc:
                raise ValueError(exc.message) from None
        return data


OPERATION_MODELS = [_operation_model(name) for name in documents.OPERATION_ARGS]

Operation = Annotated[Union[tuple(OPERATION_MODELS)], Field(discriminator="op")]  # type: ignore[valid-type]  # noqa: UP007


class OperationsIn(InputSchema):
    operations: list[Operation] = Field(  # type: ignore[valid-type]
        min_length=1,
        max_length=ITEMS_MAX,
        description="Schema operations applied in order, all or none.  Which "
        "apply depends on the block's schema: text (set_text, append_text, "
        "insert_lines, replace_text), map (set_field, append_to_list_field, "
        "append_to_text_field, replace_in_text_field, increment_counter), list "
        "(push_item, insert_item, delete_item, check_item), log "
        "(append_log_entry); a "
        "composite block adds 'section'.",
        examples=[
            [
                {
                    "op": "append_to_list_field",
                    "field": "preferences",
                    "value": "oat milk",
                },
                {"op": "set_field", "field": "context", "value": "Back from leave"},
            ]
        ],
    )
    summary: str | None = Field(
        None, max_length=300, examples=["Noted Sam's milk preference"]
    )
    _renamed: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="wrap")
    @classmethod
    def _old_argument_names(
        cls, data: Any, handler: ModelWrapValidatorHandler["OperationsIn"]
    ) -> "OperationsIn":
        # Arguments sent under an older name are taken under their name; the
        # answer says so (deprecation_notices).
        notices: list[str] = []
        if isinstance(data, dict) and isinstance(data.get("operations"), list):
            operations = []
            for op in data["operations"]:
                if isinstance(op, dict):
                    op, renamed = documents.operation_renamed(op)
                    notices.extend(renamed)
                operations.append(op)
            data = {**data, "operations": operations}
        out = handler(data)
        out._renamed = list(dict.fromkeys(notices))
        return out

    def operation_dicts(self) -> list[dict[str, Any]]:
        """The operations as the services take them (unset arguments left out)."""
        return [op.model_dump(exclude_none=True) for op in self.operations]

    def deprecation_notices(self) -> list[str]:
        return list(self._renamed)


class ChangeOut(DictSchema):
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
    number: int | None = Field(
        None,
        description="The version's number in the block's history (1 = its first); "
        "`id` names the same version site-wide.",
    )
    contains: Literal["appeared", "disappeared"] | None = Field(
        None, description="With contains: whether the text appeared or disappeared."
    )
    folded: bool = Field(
        False,
        description="History retention folded this version's content: it is "
        "listed, but cannot be viewed, compared or rolled back to.",
    )


class VersionViewOut(Schema):
    version: VersionOut
    rendered: str
    content: Any


class DiffOut(Schema):
    kind: Literal["text", "fields"]
    unified: str | None = None
    changes: list[dict[str, Any]] | None = None


class RollbackIn(InputSchema):
    version: Id | None = Field(
        None,
        description="The version's number in the block's history (1 = its first).",
        examples=[3],
    )
    version_id: Id | None = Field(
        None,
        description="Or the version's id (its `id` in the history).",
        examples=[None],
    )

    @model_validator(mode="after")
    def _one_version(self) -> "RollbackIn":
        if (self.version is None) == (self.version_id is None):
            raise ValueError(
                "give the version's number (version) or its id (version_id)"
            )
        return self


class ShareIn(InputSchema):
    agent_id: Id = Field(examples=[3])
    access: Literal["read_only", "append_only", "read_write"] = Field(
        examples=["append_only"]
    )


class BlockAttachmentOut(Schema):
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


class DecisionIn(InputSchema):
    approve: bool = Field(examples=[True])


class ImportOut(Schema):
    created: list[BlockSummaryOut]


class ContextToolIn(InputSchema):
    operation: Literal["append", "replace", "archive", "load", "swap", "changes"] = (
        Field(examples=["append"])
    )
    label: LabelText | None = Field(
        None,
        description="The block to act on (for swap: the working one); "
        "changes: only this block.  Every operation but changes needs it.",
        examples=["human"],
    )
    content: BlockText | None = Field(
        None,
        description="append: the text to add.",
        examples=["Sam prefers a short check-in before 10am."],
    )
    old: BlockText | None = Field(
        None, description="replace: the exact text to find.", examples=[None]
    )
    new: BlockText | None = Field(
        None, description="replace: its replacement.", examples=[None]
    )
    section: SectionName | None = Field(
        None, description="Section or field of a structured block.", examples=[None]
    )
    archival_label: LabelText | None = Field(
        None,
        description="swap: the archival block to bring into working memory.",
        examples=[None],
    )
    labels: list[LabelText] | None = Field(
        None,
        max_length=ITEMS_MAX,
        description="changes: only these blocks (default: every block you can read).",
        examples=[None],
    )
    peek: bool = Field(
        False, description="changes: look without moving your look.", examples=[False]
    )


ToolLabel = Annotated[
    str,
    Field(
        max_length=NAME_MAX,
        description='Which block: "persona", "human", ...',
        examples=["human"],
    ),
]

SECTION = Field(
    None,
    description="On a structured block: the section or field to change "
    '("notes", "context", "section/field"); by default the last one holding '
    "text.",
    examples=[None],
)


class CoreMemoryIn(InputSchema):
    label: ToolLabel
    content: BlockText = Field(examples=["Prefers short check-ins before 10am."])
    section: SectionName | None = SECTION


class CoreMemoryUpdateIn(InputSchema):
    label: ToolLabel
    content: BlockText = Field(
        description="The block's whole new content.  A structured block is "
        "written as it is shown in your context: 'field: value' lines, "
        "'=== section ===' headings; fields you leave out keep their content.",
        examples=[
            "name: Sam\npreferences: tea, short check-ins\ncontext: "
            "Works from home on Fridays."
        ],
    )


class CoreMemoryReplaceIn(InputSchema):
    label: ToolLabel
    old_content: BlockText = Field(
        min_length=1,
        description="The exact text to find.",
        examples=["Works from home on Fridays."],
    )
    new_content: BlockText = Field(
        description="Its replacement (empty to delete it).",
        examples=["Works from home on Mondays and Fridays."],
    )
    section: SectionName | None = SECTION


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
    folded_before: datetime | None = Field(
        None,
        description="Set when history retention folded the history that wrote "
        "the span: it was written before this time (version is null).",
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


class ChangesIn(InputSchema):
    peek: bool = Field(
        False, description="Look without moving your look.", examples=[False]
    )
    labels: list[LabelText] | None = Field(
        None,
        max_length=ITEMS_MAX,
        description="Only these blocks (default: every block you can read).",
        examples=[["human", "project_notes"]],
    )


class SeenChangeOut(Schema):
    id: int = Field(description="The version (history row) of the change.")
    created_at: datetime
    actor_kind: str
    actor_id: str
    actor_name: str
    summary: str
    diff: dict[str, Any]


class BlockChangesOut(DictSchema):
    block_id: UUID
    label: str
    changes: list[SeenChangeOut] = Field(description="Oldest first.")
    earlier: int = Field(description="Older changes left out.")
    folded: str | None = Field(
        default=None,
        description="Set when the changes reach into history retention "
        "folded: since when their content is not shown.",
    )


class ChangesOut(DictSchema):
    blocks: list[BlockChangesOut]
    advanced: bool = Field(description="Whether your look moved to now.")


class ContextToolOut(RootModel[ChangeOut | ChangesOut]):
    """The context tool's answer: ``ChangesOut`` for the changes operation,
    ``ChangeOut`` for every other."""


MEMORY_INSERT = """Insert `new_str` into memory block `label` as new lines after
line `insert_line` (0: before the first line; -1, the default: after the last,
which works on any block).  Inserting by line number needs a text block."""

MEMORY_REPLACE = """Replace the exact text `old_str` in memory block `label`
with `new_str` (empty to delete it).  `old_str` must occur exactly once:
fails, changing nothing, when it is missing or occurs more than once (give
more of the surrounding text)."""

MEMORY_RETHINK = """Rewrite memory block `label` whole: its content becomes
`new_memory`.  Use it to reorganise a block rather than patch it; a
structured block is written as it is shown in your context."""

BLOCK_CREATE_TOOL = """Create a memory block of your own, labelled `label`
(unique among your blocks), optionally from a `template`, with initial text
`content`.  Give `permission` admin if you may want to delete it later."""

BLOCK_RENAME_TOOL = """Give your memory block `label` the new label
`new_label` (unique among your blocks).  Only your own blocks you may write."""

BLOCK_DELETE_TOOL = """Delete your memory block `label` (only your own blocks
with admin permission; shared copies go with it)."""

BLOCK_SHARE_TOOL = """Share your memory block `label` with agent `agent` of
your constellation, with read_only, append_only or read_write access (again:
changes the access)."""


class MemoryInsertIn(InputSchema):
    label: ToolLabel
    new_str: BlockText = Field(
        min_length=1, examples=["Sam's sister Ana visits in June."]
    )
    insert_line: int = Field(
        -1,
        ge=-1,
        description="The line after which to insert (0: at the start; -1: at the end).",
        examples=[-1],
    )


class MemoryReplaceIn(InputSchema):
    label: ToolLabel
    old_str: BlockText = Field(
        min_length=1,
        description="The exact text to replace; it must occur exactly once.",
        examples=["Works from home on Fridays."],
    )
    new_str: BlockText = Field(
        description="Its replacement (empty to delete it).",
        examples=["Works from home on Mondays."],
    )


class MemoryRethinkIn(InputSchema):
    label: ToolLabel
    new_memory: BlockText = Field(
        description="The block's whole new content.",
        examples=["Sam: prefers short check-ins; sister Ana visits in June."],
    )


class BlockCreateToolIn(InputSchema):
    label: Label = Field(examples=["travel_plans"])
    description: Description | None = Field(None, examples=["Trips Sam is planning"])
    template: TemplateChoice | None = Field(
        None,
        description="Gives the block's schema, description and type.",
        examples=[None],
    )
    block_type: Literal["core", "working", "archival"] | None = Field(
        None, examples=["working"]
    )
    permission: PermissionChoice = Field("read_write", examples=["read_write"])
    pinned: bool = Field(False, examples=[False])
    content: BlockText = Field(
        "",
        description="Initial content, written as the block is shown in context.",
        examples=["Lisbon in May"],
    )


class BlockRenameIn(InputSchema):
    label: ToolLabel
    new_label: Label = Field(examples=["trips"])


class BlockLabelIn(InputSchema):
    label: ToolLabel


class BlockDeletedOut(Schema):
    label: str
    message: str


class BlockShareToolIn(InputSchema):
    label: ToolLabel
    agent: Annotated[str, Field(max_length=NAME_MAX)] = Field(
        description="The agent's name.", examples=["Archive"]
    )
    access: Literal["read_only", "append_only", "read_write"] = Field(
        "read_only", examples=["read_only"]
    )
