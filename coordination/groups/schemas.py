from datetime import datetime
from typing import Annotated, Any

from ninja import Field, Path, Schema

from coordination.groups.models import CoordinationPattern, MemberRole
from coordination.groups.services.deliveries import MAX_CHUNK_CHARS
from coordination.groups.services.runs import MAX_MESSAGE_CHARS
from pattern_site.kernel.apitypes import (
    ITEMS_MAX,
    LINE_MAX,
    NAME_MAX,
    Id,
    InputSchema,
)

PATTERNS = ", ".join(CoordinationPattern.values)

Name = Annotated[str, Field(max_length=NAME_MAX)]
Message = Annotated[str, Field(max_length=MAX_MESSAGE_CHARS)]
Description = Annotated[str, Field(max_length=LINE_MAX)]
CallId = Annotated[str, Path(max_length=200)]


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


class GroupCreateIn(InputSchema):
    constellation_id: Id = Field(examples=[1])
    name: str = Field(min_length=1, max_length=100, examples=["Crisis Response"])
    description: Description = Field(
        "", examples=["Handles urgent requests from the partner."]
    )
    pattern: Name = Field(description=f"One of: {PATTERNS}.", examples=["supervisor"])
    config: dict[str, Any] = Field(
        {}, description="The pattern's settings.", examples=[{"leader_id": 1}]
    )


class GroupUpdateIn(InputSchema):
    description: Description | None = Field(
        None, examples=["Handles urgent requests from the partner."]
    )
    pattern: Name | None = Field(
        None, description=f"One of: {PATTERNS}.", examples=["round_robin"]
    )
    config: dict[str, Any] | None = Field(
        None, description="The pattern's settings.", examples=[{}]
    )


class MemberIn(InputSchema):
    agent_id: Id = Field(examples=[2])
    role: Name = Field(
        MemberRole.REGULAR.value,
        description=f"One of: {', '.join(MemberRole.values)}.",
        examples=["specialist"],
    )
    domain: Name = Field("", examples=["travel"])
    capabilities: list[Name] = Field(
        [], max_length=ITEMS_MAX, examples=[["bookings", "itineraries"]]
    )


class RouteIn(InputSchema):
    message: Message = Field(
        examples=["The flight to Lisbon was cancelled; rebook it."]
    )
    options: list[Name] = Field(
        [],
        max_length=ITEMS_MAX,
        description="The choices of a voting run.",
        examples=[["Lisbon", "Porto"]],
    )


class RouteToGroupIn(InputSchema):
    """The ``route_to_group`` tool's input (ids as strings, as tools send)."""

    group_id: Name = Field(
        description="The id of the group to route through.", examples=["3"]
    )
    message: Message = Field(
        description="The message the group's agents act on.",
        examples=["The flight to Lisbon was cancelled; rebook it."],
    )


class MessageAgentIn(InputSchema):
    """The ``message_agent`` tool's input."""

    agent: Name = Field(
        description="The name of an agent of your constellation.",
        examples=["Archive"],
    )
    message: Message = Field(
        description="What you want it to know or do.",
        examples=["Please file the Lisbon receipts under travel."],
    )


class DelegateToolIn(InputSchema):
    """The ``delegate`` tool's input."""

    message: Message = Field(
        description="The part of the work the member should do.",
        examples=["Find a slot for the dentist next week."],
    )
    agent: Name | None = Field(
        None,
        description="The member's name; leave it out to let the group's"
        " delegation strategy choose.",
        examples=["Flux"],
    )
    run_id: Name | None = Field(
        None,
        description="The run you lead, when you lead several at once.",
        examples=[None],
    )


class DelegationOut(Schema):
    run_id: int
    delivery_id: int | None
    agent: str | None
    detail: str


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


class ChunkIn(InputSchema):
    text: str = Field(
        max_length=MAX_CHUNK_CHARS, examples=["Checking the later flights"]
    )


class ToolCallIn(InputSchema):
    call_id: str = Field(min_length=1, max_length=200, examples=["call-1"])
    fn_name: str = Field(
        min_length=1, max_length=200, examples=["archival_memory_search"]
    )
    args: dict[str, Any] = Field({}, examples=[{"query": "Lisbon hotel"}])


class ToolResultIn(InputSchema):
    result: Any = Field(None, examples=[["Hotel Avenida, booked until Sunday"]])


class AnswerIn(InputSchema):
    text: Message = Field(examples=["Rebooked on the 18:40 flight; the hotel knows."])
    vote: str = Field(
        "", max_length=200, description="A vote delivery's choice.", examples=["Porto"]
    )


class FailureIn(InputSchema):
    reason: Message = Field("", examples=["The airline's site is down"])


class DelegateIn(InputSchema):
    message: Message = Field(examples=["Find a hotel near the new arrival time."])
    agent_id: Id | None = Field(
        None,
        description="The member to ask; null lets the pattern choose.",
        examples=[2],
    )


class MetricIn(InputSchema):
    metric: Name = Field(examples=["unread_messages"])
    value: float = Field(allow_inf_nan=False, examples=[12.0])
