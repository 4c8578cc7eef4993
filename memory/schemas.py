"""Request and response shapes of the context builder's endpoint."""

from typing import Annotated, Any, Literal

from ninja import Field, Schema

from pattern_site.kernel.apitypes import (
    ITEMS_MAX,
    NAME_MAX,
    TEXT_MAX,
    Id,
    InputSchema,
)

BUILD_CONTEXT = """Build the system prompt you run with from your memory: base
instructions, core blocks, pinned working blocks (and the working blocks named
in `batch_block_ids`), recent activity and tool rules, with an estimated token
count per section. Humans give `agent_id`; agents omit it (their own)."""


class ToolRuleIn(InputSchema):
    tool: str = Field(max_length=NAME_MAX, examples=["send_message"])
    kind: Literal[
        "start_constraint", "exit_loop", "continue_loop", "max_calls", "requires_prior"
    ] = Field(examples=["exit_loop"])
    value: int | Annotated[str, Field(max_length=NAME_MAX)] | None = Field(
        None,
        description="max_calls: a number; requires_prior: a tool.",
        examples=[None],
    )


class ContextBuildIn(InputSchema):
    agent_id: Id | None = Field(
        None, description="Agents may omit it (themselves).", examples=[None]
    )
    batch_block_ids: list[Annotated[str, Field(max_length=NAME_MAX)]] = Field(
        default_factory=list,
        max_length=ITEMS_MAX,
        description="Ids or labels of working blocks to include for this request.",
        examples=[["task_board"]],
    )
    base_instructions: str | None = Field(
        None,
        max_length=TEXT_MAX,
        examples=["You help Sam plan the week in small steps."],
    )
    tool_rules: list[ToolRuleIn] = Field(default_factory=list, max_length=ITEMS_MAX)
    model: str | None = Field(
        None,
        max_length=NAME_MAX,
        description="Counts tokens for this model.",
        examples=["gpt-4o-mini"],
    )
    include_descriptions: bool = Field(True, examples=[True])
    include_request: bool = Field(
        False,
        description="Also return the whole request the model would get now:"
        " the system prompt, then the agent's conversation history as"
        " compressed for the model.",
        examples=[False],
    )


class SectionOut(Schema):
    name: str
    text: str
    tokens: int
    blocks: list[str]


class ContextOut(Schema):
    system_prompt: str
    sections: list[SectionOut]
    metadata: dict[str, Any]
    request: list[dict[str, Any]] | None = None
