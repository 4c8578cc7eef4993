"""Who may do what with a folder: the one place that decides.

Humans of a folder's constellation (partner and members) manage it: they
create and delete folders, attach them to agents, and change files.  An
agent sees only the folders attached to it (any other folder does not
exist for it); ``read`` lets it open, read, grep and search the files,
``read_write`` also upload, change and delete them.  The system actor
(management commands, Celery) may do anything.
"""

from enum import Enum

from django.db.models import Q, QuerySet

from folders.files.models import Folder, FolderAccess
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent
from pattern_site.kernel.agents.selectors import constellation_list_for_actor
from pattern_site.kernel.errors import NotFound, PermissionDenied


class Right(Enum):
    READ = "read"  # open, read, grep, search
    WRITE = "write"  # upload, change, delete files
    MANAGE = "manage"  # rename, delete the folder, attach it to agents


def folders_visible(*, actor: Actor) -> QuerySet[Folder]:
    """The folders ``actor`` may see at all (the rest answer 404)."""
    qs = Folder.objects.select_related("constellation")
    if actor.kind == "system":
        return qs.all()
    if actor.kind == "agent":
        assert actor.agent is not None
        return qs.filter(attachments__agent=actor.agent)
    visible = constellation_list_for_actor(actor=actor).values("pk")
    return qs.filter(constellation__in=visible)


def folder_rights(*, actor: Actor, folder: Folder) -> frozenset[Right]:
    if actor.kind != "agent":
        if folders_visible(actor=actor).filter(pk=folder.pk).exists():
            return frozenset(Right)
        return frozenset()
    assert actor.agent is not None
    access = (
        folder.attachments.filter(agent=actor.agent)
        .values_list("access", flat=True)
        .first()
    )
    if access is None:
        return frozenset()
    if access == FolderAccess.READ_WRITE:
        return frozenset({Right.READ, Right.WRITE})
    return frozenset({Right.READ})


def folder_require(*, actor: Actor, folder: Folder, right: Right) -> None:
    """Raise unless ``actor`` holds ``right`` on ``folder`` (404 if unseen)."""
    rights = folder_rights(actor=actor, folder=folder)
    if not rights:
        raise NotFound(f"folder {folder.pk} does not exist")
    if right in rights:
        return
    if right is Right.WRITE:
        raise PermissionDenied(
            f"folder {folder.name!r} is attached read-only to {actor.display_name};"
            " uploading, changing or deleting files needs read_write access"
        )
    raise PermissionDenied(
        f"only the humans of the constellation manage folder {folder.name!r};"
        " agents may use the folders attached to them"
    )


def folder_visible_filter(*, actor: Actor) -> Q:
    """``folders_visible`` as a filter on a relation named ``folder``."""
    return Q(folder__in=folders_visible(actor=actor).values("pk"))


def folder_create_require(*, actor: Actor) -> None:
    if actor.kind == "agent":
        raise PermissionDenied(
            "only the humans of the constellation create folders; agents use"
            " the folders attached to them"
        )


def tool_agent(*, actor: Actor) -> Agent:
    """The agent whose context a file tool changes (open files are per agent)."""
    if actor.agent is None:
        raise PermissionDenied(
            "open files live in an agent's context; call the file tools with"
            " an agent token"
        )
    return actor.agent
