"""Request and response shapes of the context builder's endpoint."""

from typing import Any, Literal

from ninja import Field, Schema

BUILD_CONTEXT = """Build the system prompt you run with from your memory: base
instructions, core blocks, pinned working blocks (and the working blocks named
in `batch_block_ids`), recent activity and tool rules, with an estimated token
count per section. Humans give `agent_id`; agents omit it (their own)."""


class ToolRuleIn(Schema):
    tool: str
    kind: Literal[
        "start_constraint", "exit_loop", "continue_loop", "max_calls", "requires_prior"
    ]
    value: int | str | None = None


class ContextBuildIn(Schema):
    agent_id: int | None = Field(None, description="Agents may omit it (themselves).")
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
