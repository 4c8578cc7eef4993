from datetime import datetime
from typing import Any

from ninja import Field, Schema

from coordination.actors import Actor
from coordination.work.models import (
    DESCRIPTION_MAX_CHARS,
    HANDOFF_MAX_CHARS,
    TITLE_MAX_CHARS,
    TaskPriority,
)


class CoordIn(Schema):
    command: str = Field(
        ...,
        max_length=HANDOFF_MAX_CHARS + 200,
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


class TaskCreateIn(Schema):
    constellation_id: int | None = None
    title: str = Field(..., min_length=1, max_length=TITLE_MAX_CHARS)
    description: str = Field("", max_length=DESCRIPTION_MAX_CHARS)
    assignee_id: int | None = None
    priority: TaskPriority = TaskPriority.NORMAL
    parent_id: int | None = None
    depends_on: list[int] = Field(default_factory=list, max_length=100)
    due_at: datetime | None = None


class TaskAssignIn(Schema):
    assignee_id: int | None = Field(None, description="null unassigns the task")


class TaskStatusIn(Schema):
    status: str = Field(
        ..., description="open, in_progress, blocked, done or cancelled"
    )
    reason: str = Field("", max_length=DESCRIPTION_MAX_CHARS)


class TaskDependencyIn(Schema):
    depends_on: int


class HandoffIn(Schema):
    to_agent_id: int | None = Field(None, description="null: for any agent")
    content: str = Field(..., min_length=1, max_length=HANDOFF_MAX_CHARS)


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


class StateIn(Schema):
    value: Any
    version: int = Field(
        ..., ge=0, description="the version you read; 0 creates a new key"
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
