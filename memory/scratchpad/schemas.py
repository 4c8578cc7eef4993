"""The scratchpad tools' descriptions, inputs and answers."""

from datetime import datetime
from typing import Annotated, Any

from ninja import Schema
from pydantic import Field

from memory.scratchpad.services import SCRATCHPAD_KEY_MAX, SCRATCHPAD_VALUE_MAX_BYTES
from pattern_site.kernel.apitypes import Id, InputSchema

Key = Annotated[
    str,
    Field(
        min_length=1,
        max_length=SCRATCHPAD_KEY_MAX,
        description="The note's name, 1-100 characters.",
        examples=["open_questions"],
    ),
]
ConversationId = Annotated[
    Id | None,
    Field(
        description="The conversation whose notes these are; an agent's current"
        " one when left out (a human must give it).",
        examples=[12],
    ),
]

SCRATCHPAD_WRITE = (
    "Save a working note for this conversation: a key and any JSON value"
    f" (at most {SCRATCHPAD_VALUE_MAX_BYTES // 1024} KiB as JSON), replacing the"
    " key's value if it has one. Private to you: other agents never see it;"
    " it is not sent to you with each request (read it with scratchpad_read)."
    " Use it for partial results, findings gathered across tool calls and task"
    " state; archival memory is for facts worth keeping for the long term."
)
SCRATCHPAD_READ = "Read one of your working notes of this conversation by key."
SCRATCHPAD_LIST = "List your working notes of this conversation (keys and values)."
SCRATCHPAD_CLEAR = (
    "Clear one working note (give its key) or every note of this conversation"
    " (leave the key out). Notes are kept when a conversation is archived;"
    " only this clears them."
)


class ScratchpadWriteIn(InputSchema):
    key: Key
    value: Any = Field(
        ..., description="Any JSON value but null.", examples=[{"found": 3}]
    )
    conversation_id: ConversationId = None


class ScratchpadKeyIn(InputSchema):
    key: Key
    conversation_id: ConversationId = None


class ScratchpadListIn(InputSchema):
    conversation_id: ConversationId = None


class ScratchpadClearIn(InputSchema):
    key: Key | None = Field(
        None,
        description="One key; all notes when left out.",
        examples=["open_questions"],
    )
    conversation_id: ConversationId = None


class ScratchpadEntryOut(Schema):
    conversation_id: int
    key: str
    value: Any
    created_at: datetime
    updated_at: datetime


class ScratchpadListOut(Schema):
    conversation_id: int | None = Field(
        description="None when the agent has no conversation yet."
    )
    entries: list[ScratchpadEntryOut]


class ScratchpadClearOut(Schema):
    conversation_id: int | None
    cleared: int = Field(description="How many notes were removed.")
