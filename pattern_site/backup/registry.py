"""Which rows belong to a constellation, model by model, and which of their
columns hold ids that are not foreign keys.

The exporter and the importer read every concrete field of these models
generically (``_meta``); what they cannot learn from ``_meta`` is declared
here: how to select a constellation's rows, and the ids kept in plain
columns, in ``Actor.ref`` strings (``agent:12``) and inside JSON.  Models are
listed parents first, the order rows are inserted in.  A model of the site's
apps that is neither listed nor in ``EXCLUDED`` fails the backup tests, so a
new table cannot silently stay behind.
"""

from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import models

from activity.models import (
    ActivityEvent,
    ActivityHourCount,
    ActivityTerm,
    AgentSummary,
    ConstellationSummary,
    LLMUsage,
)
from coordination.models import (
    Agent,
    AgentGroup,
    AgentLoopConfig,
    AgentToken,
    AgentToolCall,
    AgentTurn,
    Constellation,
    CoordinationState,
    GroupMembership,
    GroupRun,
    GroupRunEvent,
    HandoffNote,
    RunDelivery,
    Task,
)
from coordination.work.selectors import HANDOFF, TASK
from folders.models import (
    FilePassage,
    Folder,
    FolderAttachment,
    FolderFile,
    OpenFile,
)
from memory.longterm.selectors import CONVERSATION
from memory.models import (
    ArchivalEntry,
    ArchivalRole,
    BlockApproval,
    BlockAttachment,
    BlockLook,
    BlockPeer,
    BlockSeen,
    BlockSnapshot,
    BlockUpdate,
    ConsolidationRun,
    ContextConfig,
    Conversation,
    MemoryBlock,
    Message,
    RetrievalConfig,
    ScratchpadEntry,
)

# The user model, by label: users travel by username, not by id.
USER = settings.AUTH_USER_MODEL.lower()


@dataclass(frozen=True)
class Ref:
    """A value naming a row of ``target`` (a model label, ``app.model``),
    as an integer or as a string ``prefix`` + id."""

    target: str
    prefix: str = ""


def label(model: type[models.Model]) -> str:
    return model._meta.label_lower


@dataclass(frozen=True)
class Owned:
    """A model whose rows belong to one constellation."""

    model: type[models.Model]
    # The lookup from a row to its constellation's id.
    scope: str
    # Plain columns holding an id: column -> what it names.  ``0`` and
    # None name nothing.
    ids: dict[str, Ref] = field(default_factory=dict)
    # Columns holding an ``Actor.ref`` (``agent:<id>``, ``human:<user id>``).
    actor_refs: tuple[str, ...] = ()
    # (kind column, id column) pairs: an actor split over two columns.
    actor_pairs: tuple[tuple[str, str], ...] = ()
    # JSON columns -> {key: Ref}: the key's value, at any depth of the
    # column's value, is an id (or a list of ids).
    json_ids: dict[str, dict[str, Ref]] = field(default_factory=dict)
    # JSON columns -> {key: Ref}: the key's value is an object keyed by ids.
    json_keyed: dict[str, dict[str, Ref]] = field(default_factory=dict)
    # (kind column, id column, {kind: Ref}): an id whose table the kind
    # column names (what an activity event is about).
    object_pairs: tuple[tuple[str, str, dict[str, Ref]], ...] = ()

    @property
    def label(self) -> str:
        return label(self.model)

    def rows(self, constellation: Constellation) -> models.QuerySet:
        return self.model._default_manager.filter(**{self.scope: constellation.pk})


AGENT = Ref(label(Agent))
# The agents a group's configuration names (pattern configs).
GROUP_CONFIG_IDS = {
    "leader_id": AGENT,
    "intervention_agent_id": AGENT,
    "agent_ids": AGENT,
}
# What group runs and their events name in their bookkeeping.
RUN_IDS = {
    **GROUP_CONFIG_IDS,
    "agent_id": AGENT,
    "delivery_id": Ref(label(RunDelivery)),
    # A run event's message is the delivery that answered.
    "message_id": Ref(label(RunDelivery)),
    "run_id": Ref(label(GroupRun)),
    "group_id": Ref(label(AgentGroup)),
}
ACTIVITY_DETAIL_IDS = {
    "agents_involved": AGENT,
    "assignee_id": AGENT,
    "agent_id": AGENT,
    "entry_id": Ref(label(ArchivalEntry)),
    "conversation_id": Ref(label(Conversation)),
    "handoff_id": Ref(label(HandoffNote)),
    "task": Ref(label(Task), prefix="task-"),
}

# The objects an activity event is about, by kind.
ACTIVITY_OBJECTS = {
    TASK: Ref(label(Task)),
    HANDOFF: Ref(label(HandoffNote)),
    CONVERSATION: Ref(label(Conversation)),
}
# An archival entry's history names the entries it was merged with.
ENTRY_HISTORY_IDS = {"entry_id": Ref(label(ArchivalEntry))}

OWNED: tuple[Owned, ...] = (
    Owned(Constellation, "pk"),
    Owned(Agent, "constellation"),
    # memory
    Owned(
        MemoryBlock,
        "constellation",
        ids={
            "snapshot_upto": Ref(label(BlockUpdate)),
            "history_from": Ref(label(BlockUpdate)),
        },
    ),
    Owned(
        BlockUpdate,
        "block__constellation",
        actor_pairs=(("actor_kind", "actor_id"),),
    ),
    Owned(BlockSnapshot, "block__constellation"),
    Owned(BlockAttachment, "block__constellation"),
    Owned(BlockApproval, "block__constellation"),
    Owned(
        BlockSeen,
        "block__constellation",
        ids={"upto": Ref(label(BlockUpdate))},
    ),
    Owned(ArchivalEntry, "constellation", json_ids={"history": ENTRY_HISTORY_IDS}),
    Owned(ConsolidationRun, "constellation"),
    Owned(ArchivalRole, "agent__constellation"),
    Owned(Conversation, "constellation"),
    Owned(Message, "constellation"),
    Owned(ScratchpadEntry, "constellation"),
    Owned(RetrievalConfig, "constellation"),
    Owned(ContextConfig, "constellation"),
    # coordination
    Owned(
        Task,
        "constellation",
        actor_refs=("updated_by",),
    ),
    Owned(
        HandoffNote,
        "constellation",
        actor_refs=("read_by",),
    ),
    Owned(
        CoordinationState,
        "constellation",
        actor_refs=("updated_by",),
    ),
    Owned(
        AgentGroup,
        "constellation",
        json_ids={"config": GROUP_CONFIG_IDS},
    ),
    Owned(GroupMembership, "group__constellation"),
    Owned(
        GroupRun,
        "group__constellation",
        actor_refs=("requested_by",),
        json_ids={"config": GROUP_CONFIG_IDS, "state": RUN_IDS, "result": RUN_IDS},
        json_keyed={"state": {"delegations": AGENT}},
    ),
    Owned(RunDelivery, "run__group__constellation"),
    Owned(AgentLoopConfig, "agent__constellation"),
    Owned(
        AgentTurn,
        "agent__constellation",
        ids={"conversation_id": Ref(label(Conversation))},
    ),
    Owned(AgentToolCall, "turn__agent__constellation"),
    Owned(
        GroupRunEvent,
        "run__group__constellation",
        json_ids={"data": RUN_IDS},
    ),
    # folders
    Owned(Folder, "constellation"),
    Owned(FolderFile, "folder__constellation"),
    Owned(FilePassage, "constellation"),
    Owned(
        FolderAttachment,
        "folder__constellation",
    ),
    Owned(OpenFile, "file__folder__constellation"),
    # activity
    Owned(
        ActivityEvent,
        "constellation",
        json_ids={"details": ACTIVITY_DETAIL_IDS},
        object_pairs=(("object_kind", "object_id", ACTIVITY_OBJECTS),),
    ),
    Owned(
        ActivityTerm,
        "event__constellation",
        ids={"constellation_id_value": Ref(label(Constellation))},
    ),
    Owned(
        ActivityHourCount,
        "constellation",
        ids={"agent_key": AGENT, "user_key": Ref(USER)},
    ),
    Owned(AgentSummary, "agent__constellation"),
    Owned(
        ConstellationSummary,
        "constellation",
    ),
    Owned(LLMUsage, "constellation"),
)

# Models of the site's apps a backup leaves out, and why.
EXCLUDED: dict[type[models.Model], str] = {
    AgentToken: "tokens never leave the site: issue new ones after an import",
    BlockLook: "where a person last looked is their dashboard's marker on this"
    " site; after an import the pages start from the first visit",
    BlockPeer: "the co-editing sockets of this site; an imported block has none",
}

# The apps whose every model must be in OWNED or EXCLUDED.
SITE_APPS = ("coordination", "memory", "activity", "folders")


def owned_by_label() -> dict[str, Owned]:
    return {owned.label: owned for owned in OWNED}


def user_model() -> type[models.Model]:
    return get_user_model()
