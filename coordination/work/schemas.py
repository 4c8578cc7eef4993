from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Field, Path, Schema

from coordination.work.models import (
    DESCRIPTION_MAX_CHARS,
    HANDOFF_MAX_CHARS,
    STATE_KEY_MAX_CHARS,
    TITLE_MAX_CHARS,
    TaskPriority,
    TaskStatus,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.apitypes import Id, InputSchema, Moment, Offset

StateKey = Annotated[str, Path(max_length=STATE_KEY_MAX_CHARS)]


class CoordIn(InputSchema):
    command: str = Field(
        ...,
        max_length=HANDOFF_MAX_CHARS + 200,
        examples=["claim task-12"],
        description="One /coord command, e.g. `claim task-12` or "
        '`handoff @anchor "context..."`.',
    )


class CoordOut(Schema):
    command: str
    text: str
    data: dict[str, Any]


class TaskRefOut(Schema):
    id: int
    ref: str
    title: str
    status: str


class TaskOut(Schema):
    id: int
    ref: str
    constellation_id: int
    title: str
    description: str
    status: str
    priority: int
    blocked_reason: str
    assignee_id: int | None
    assignee: str | None
    parent_id: int | None
    dependencies: list[TaskRefOut]
    subtasks: list[TaskRefOut]
    created_by: str
    updated_by: str
    due_at: datetime | None
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def resolve_assignee(obj: Any) -> str | None:
        return obj.assignee.name if obj.assignee else None

    @staticmethod
    def resolve_dependencies(obj: Any) -> list[Any]:
        return list(obj.dependencies.all())

    @staticmethod
    def resolve_subtasks(obj: Any) -> list[Any]:
        return list(obj.subtasks.all())

    @staticmethod
    def resolve_created_by(obj: Any) -> str:
        agent, user = obj.created_by_agent, obj.created_by_user
        kind = "agent" if agent else "human" if user else "system"
        return Actor(kind=kind, agent=agent, user=user).display_name

    @staticmethod
    def resolve_updated_by(obj: Any) -> str:
        return obj.updated_by_name


class TaskCreateIn(InputSchema):
    constellation_id: Id | None = Field(
        None, description="Your constellation by default.", examples=[1]
    )
    title: str = Field(
        ...,
        min_length=1,
        max_length=TITLE_MAX_CHARS,
        examples=["Book the dentist for Friday"],
    )
    description: str = Field(
        "",
        max_length=DESCRIPTION_MAX_CHARS,
        examples=["Dr. Reyes, before noon; the partner works late on Friday."],
    )
    assignee_id: Id | None = Field(None, examples=[2])
    priority: Literal[0, 1, 2, 3] = Field(
        TaskPriority.NORMAL.value,
        description="0 low, 1 normal, 2 high, 3 urgent.",
        examples=[2],
    )
    parent_id: Id | None = Field(None, examples=[12])
    depends_on: list[Id] = Field(
        default_factory=list,
        max_length=100,
        description="Ids of tasks that must be done first.",
        examples=[[10, 11]],
    )
    due_at: Moment | None = Field(None, examples=["2026-11-27T12:00:00Z"])


class TaskAssignIn(InputSchema):
    assignee_id: Id | None = Field(
        None, description="null unassigns the task", examples=[2]
    )


class TaskStatusIn(InputSchema):
    status: Literal[tuple(TaskStatus.values)] = Field(  # type: ignore[valid-type]
        ...,
        description="open, in_progress, blocked, done or cancelled",
        examples=["blocked"],
    )
    reason: str = Field(
        "",
        max_length=DESCRIPTION_MAX_CHARS,
        description="Required when blocking.",
        examples=["Waiting for the partner to confirm the time"],
    )


class TaskDependencyIn(InputSchema):
    depends_on: Id = Field(..., examples=[11])


class HandoffIn(InputSchema):
    to_agent_id: Id | None = Field(
        None, description="null: for any agent", examples=[2]
    )
    content: str = Field(
        ...,
        min_length=1,
        max_length=HANDOFF_MAX_CHARS,
        examples=["The partner prefers morning appointments; task-12 is yours."],
    )


class HandoffOut(Schema):
    id: int
    ref: str
    from_agent_id: int
    from_agent: str
    to_agent_id: int | None
    to_agent: str | None
    content: str
    created_at: datetime
    read_at: datetime | None

    @staticmethod
    def resolve_from_agent(obj: Any) -> str:
        return obj.from_agent.name

    @staticmethod
    def resolve_to_agent(obj: Any) -> str | None:
        return obj.to_agent.name if obj.to_agent else None


class StateIn(InputSchema):
    value: Any = Field(..., examples=[{"dentist": "Friday 10:00"}])
    version: Offset = Field(
        ...,
        description="the version you read; 0 creates a new key",
        examples=[3],
    )


class StateOut(Schema):
    key: str
    value: Any
    version: int
    updated_by: str
    updated_at: datetime

    @staticmethod
    def resolve_updated_by(obj: Any) -> str:
        return obj.updated_by_name
