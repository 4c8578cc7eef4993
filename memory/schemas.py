"""Request and response shapes of the context builder's endpoint."""

from typing import Any, Literal

from ninja import Field, Schema

from coordination.apitypes import Id


class ToolRuleIn(Schema):
    tool: str
    kind: Literal[
        "start_constraint", "exit_loop", "continue_loop", "max_calls", "requires_prior"
    ]
    value: int | str | None = None


class ContextBuildIn(Schema):
    agent_id: Id | None = Field(None, description="Agents may omit it (themselves).")
    batch_block_ids: list[str] = Field(
        default_factory=list,
        description="Ids or labels of working blocks to include for this request.",
    )
    base_instructions: str | None = None
    tool_rules: list[ToolRuleIn] = Field(default_factory=list)
    model: str | None = None
    include_descriptions: bool = True


class SectionOut(Schema):
    name: str
    text: str
    tokens: int
    blocks: list[str]


class ContextOut(Schema):
    system_prompt: str
    sections: list[SectionOut]
    metadata: dict[str, Any]
