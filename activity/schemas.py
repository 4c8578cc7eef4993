from datetime import datetime
from typing import Any, Literal

from ninja import Field, Schema

from activity.stream.models import Importance
from pattern_site.kernel.apitypes import Id, InputSchema


class ActivityEventOut(Schema):
    id: int
    constellation_id: int
    agent_id: int | None
    actor: str | None
    event_type: str
    importance: str
    text: str
    details: dict[str, Any]
    created_at: datetime

    @staticmethod
    def resolve_actor(obj: Any) -> str | None:
        return obj.actor_user.get_username() if obj.actor_user_id else None


class NotableIn(InputSchema):
    description: str = Field(
        ...,
        min_length=1,
        max_length=400,
        examples=["The partner chose the Lisbon offer over the Berlin one"],
    )
    importance: Literal[tuple(Importance.values)] = Field(  # type: ignore[valid-type]
        Importance.MEDIUM.value,
        description="Medium and above feed Key Decisions.",
        examples=["high"],
    )
    agents_involved: list[Id] = Field(
        default_factory=list, max_length=20, examples=[[1, 2]]
    )
    constellation_id: Id | None = Field(
        None, description="Your constellation by default.", examples=[1]
    )


class NotableOut(Schema):
    recorded: bool


class CatchUpOut(Schema):
    agent_id: int
    due: bool
    since: datetime | None
    away_seconds: int
    text: str
    budget_tokens: int
    tokens: int
    omitted_lines: int
    summarizer: str
