from datetime import datetime
from typing import Any

from ninja import Field, Schema


class MemberOut(Schema):
    agent_id: int
    agent_name: str
    role: str
    domain: str
    capabilities: list[str]
    last_routed_at: datetime | None

    @staticmethod
    def resolve_agent_name(obj: Any) -> str:
        return obj.agent.name


class GroupOut(Schema):
    id: int
    constellation_id: int
    name: str
    description: str
    pattern: str
    config: dict[str, Any]
    state: dict[str, Any]
    members: list[MemberOut]

    @staticmethod
    def resolve_members(obj: Any) -> list[Any]:
        return list(obj.memberships.all())


class GroupCreateIn(Schema):
    constellation_id: int
    name: str = Field(min_length=1, max_length=100)
    description: str = ""
    pattern: str
    config: dict[str, Any] = {}


class GroupUpdateIn(Schema):
    description: str | None = None
    pattern: str | None = None
    config: dict[str, Any] | None = None


class MemberIn(Schema):
    agent_id: int
    role: str = "regular"
    domain: str = ""
    capabilities: list[str] = []


class RouteIn(Schema):
    message: str
    options: list[str] = []


class RouteToGroupIn(Schema):
    """The ``route_to_group`` tool's input (ids as strings, as tools send)."""

    group_id: str = Field(description="The id of the group to route through.")
    message: str = Field(description="The message the group's agents act on.")


class EventOut(Schema):
    seq: int
    type: str
    data: dict[str, Any]
    created_at: datetime


class DeliveryOut(Schema):
    id: int
    run_id: int
    group_id: int
    group_name: str
    pattern: str
    kind: str
    role: str
    content: str
    stage: int | None
    attempt: int
    status: str
    deadline_at: datetime | None
    options: list[str]

    @staticmethod
    def resolve_group_id(obj: Any) -> int:
        return obj.run.group_id

    @staticmethod
    def resolve_group_name(obj: Any) -> str:
        return obj.run.group.name

    @staticmethod
    def resolve_pattern(obj: Any) -> str:
        return obj.run.pattern

    @staticmethod
    def resolve_options(obj: Any) -> list[str]:
        return obj.run.options


class RunOut(Schema):
    id: int
    group_id: int
    pattern: str
    message: str
    status: str
    requested_by: str
    result: dict[str, Any]
    started_at: datetime
    finished_at: datetime | None
    events_url: str

    @staticmethod
    def resolve_events_url(obj: Any) -> str:
        return f"/api/runs/{obj.pk}/events"


class RunDetailOut(RunOut):
    events: list[EventOut]

    @staticmethod
    def resolve_events(obj: Any) -> list[Any]:
        return list(obj.events.order_by("seq"))


class ChunkIn(Schema):
    text: str


class ToolCallIn(Schema):
    call_id: str = Field(min_length=1, max_length=200)
    fn_name: str = Field(min_length=1, max_length=200)
    args: dict[str, Any] = {}


class ToolResultIn(Schema):
    result: Any = None


class AnswerIn(Schema):
    text: str
    vote: str = ""


class FailureIn(Schema):
    reason: str = ""


class DelegateIn(Schema):
    message: str
    agent_id: int | None = None


class MetricIn(Schema):
    metric: str
    value: float
