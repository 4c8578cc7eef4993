from datetime import datetime

from ninja import Field, Schema

from pattern_site.kernel.apitypes import LINE_MAX, NAME_MAX, InputSchema


class ConstellationOut(Schema):
    id: int
    name: str
    partner: str
    created_at: datetime

    @staticmethod
    def resolve_partner(obj: object) -> str:
        return obj.partner.get_username()  # type: ignore[attr-defined]


class AgentOut(Schema):
    id: int
    constellation_id: int
    name: str
    role: str
    description: str
    model_name: str
    answered_by_llm: bool
    is_active: bool
    last_active_at: datetime | None
    created_at: datetime


class WhoAmIOut(Schema):
    kind: str
    id: str
    name: str
    agent: AgentOut | None = None


class AgentUpdateIn(InputSchema):
    role: str | None = Field(None, max_length=200, examples=["Task manager"])
    description: str | None = Field(
        None,
        max_length=LINE_MAX,
        examples=["Breaks big plans into small, doable steps"],
    )
    model_name: str | None = Field(
        None,
        max_length=NAME_MAX,
        description="The model the agent runs on.",
        examples=["gpt-4o-mini"],
    )
    answered_by_llm: bool | None = Field(
        None,
        description=(
            "True: the site answers the agent's group deliveries with"
            " model_name through its LLM provider (PATTERN_LLM_BASE_URL), and"
            " the agent has no inbox. False: an external program takes them"
            " from GET /api/inbox."
        ),
        examples=[False],
    )
    is_active: bool | None = Field(None, examples=[True])
