"""Writes of constellations, agents and agent tokens.

Tokens: a new token is returned once, in clear, by the service that makes
it; only its SHA-256 is stored.  Issuing a token revokes the agent's
earlier ones (rotation).
"""

import hashlib
import logging
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent, AgentToken, Constellation
from pattern_site.kernel.agents.roles import ROLE_TEMPLATES
from pattern_site.kernel.agents.selectors import demo_login_path
from pattern_site.kernel.agents.tasks import agent_touch_task
from pattern_site.kernel.db.compiled import CompiledQuery
from pattern_site.kernel.errors import AuthenticationFailed, Conflict, InvalidInput
from pattern_site.kernel.events import EventType, event_record
from pattern_site.kernel.rights import rights_revoke_send

logger = logging.getLogger(__name__)

TOKEN_PREFIX = "pat_"
# How stale ``last_active_at`` may get before a request refreshes it; keeps
# authentication from writing on every request.
ACTIVITY_RESOLUTION = timedelta(seconds=60)


@dataclass(frozen=True)
class IssuedToken:
    token: AgentToken
    raw: str


def token_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


@transaction.atomic
def constellation_create(
    *,
    name: str,
    partner: AbstractBaseUser,
    members: list[AbstractBaseUser] | None = None,
) -> Constellation:
    if Constellation.objects.filter(name=name).exists():
        raise Conflict(f"a constellation named {name!r} already exists")
    constellation = Constellation(name=name, partner=partner)
    constellation.full_clean()
    constellation.save()
    if members:
        constellation.members.add(*members)
    return constellation


@transaction.atomic
def constellation_member_add(
    *, constellation: Constellation, user: AbstractBaseUser
) -> None:
    constellation.members.add(user)


@transaction.atomic
def agent_create(
    *,
    constellation: Constellation,
    name: str,
    role: str = "",
    description: str = "",
    model_name: str = "",
) -> tuple[Agent, IssuedToken]:
    if constellation.agents.filter(name=name).exists():
        raise Conflict(
            f"constellation {constellation.name!r} already has an agent named {name!r}"
        )
    agent = Agent(
        constellation=constellation,
        name=name,
        role=role,
        description=description,
        model_name=model_name,
    )
    agent.full_clean()
    agent.save()
    event_record(
        actor=Actor.system(),
        agent=agent,
        event_type=EventType.AGENT_ACTIVATED,
        details={"reason": "created"},
    )
    return agent, agent_token_issue(agent=agent)


@transaction.atomic
def agent_token_issue(*, agent: Agent) -> IssuedToken:
    """Make a new token for ``agent`` and revoke its earlier ones (their
    open sockets end, as with :func:`agent_token_revoke`)."""
    revoked = _tokens_revoke(agent=agent)
    if revoked:
        rights_revoke_send(agent_id=agent.pk)
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = AgentToken(agent=agent, key_hash=token_hash(raw), prefix=raw[:12])
    token.full_clean()
    token.save()
    event_record(
        actor=Actor.system(),
        agent=agent,
        event_type=EventType.NOTABLE,
        details={
            "description": f"new API token {token.prefix}… issued to {agent.name}"
            + (f", {revoked} earlier revoked" if revoked else ""),
            "token_prefix": token.prefix,
            "revoked": revoked,
        },
    )
    return IssuedToken(token=token, raw=raw)


def _tokens_revoke(*, agent: Agent) -> int:
    return AgentToken.objects.filter(agent=agent, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )


@transaction.atomic
def agent_token_revoke(*, agent: Agent) -> int:
    """Revoke every active token of ``agent``; returns how many.  The
    agent's open sockets lose what they joined with a token at once."""
    revoked = _tokens_revoke(agent=agent)
    if revoked:
        rights_revoke_send(agent_id=agent.pk)
        event_record(
            actor=Actor.system(),
            agent=agent,
            event_type=EventType.NOTABLE,
            details={
                "description": f"{revoked} API token(s) of {agent.name} revoked",
                "revoked": revoked,
            },
        )
    return revoked


# Every tool-API request runs this: compiled once (see pattern_site.kernel.db.compiled).
_TOKEN_BY_HASH = CompiledQuery(
    lambda key_hash: (
        AgentToken.objects.select_related("agent__constellation")
        .filter(key_hash=key_hash)
        .order_by()[:1]
    ),
    key_hash="\x00key_hash",
)


def agent_token_authenticate(*, raw: str) -> Agent:
    """The active agent whose live token is ``raw``, or ``AuthenticationFailed``."""
    return _token_authenticate(raw=raw).agent


def agent_token_actor(*, raw: str) -> Actor:
    """The agent whose live token is ``raw`` as an actor bound to that token,
    for a connection that outlives the check (see ``Actor.token_id``)."""
    token = _token_authenticate(raw=raw)
    return Actor.for_agent(token.agent, token_id=token.pk)


def agent_token_actor_recheck(*, actor: Actor) -> Actor:
    """``actor`` (bound to a token by :func:`agent_token_actor`) as the
    database has it now, or ``AuthenticationFailed`` when its token was
    revoked or its agent deactivated since."""
    token = None
    if actor.token_id is not None:
        token = (
            AgentToken.objects.select_related("agent__constellation")
            .filter(pk=actor.token_id, revoked_at__isnull=True, agent__is_active=True)
            .first()
        )
    if token is None:
        raise AuthenticationFailed(
            "the agent token this connection authenticated with is revoked, "
            "or its agent deactivated"
        )
    return Actor.for_agent(token.agent, token_id=token.pk)


def _token_authenticate(*, raw: str) -> AgentToken:
    token = _TOKEN_BY_HASH.first(key_hash=token_hash(raw))
    if token is None:
        raise AuthenticationFailed("invalid agent token")
    if token.revoked_at is not None:
        raise AuthenticationFailed(
            "this agent token was revoked; ask an operator for a new one"
        )
    agent = token.agent
    if not agent.is_active:
        raise AuthenticationFailed(f"agent {agent.name!r} is deactivated")
    now = timezone.now()
    if agent.last_active_at is None or now - agent.last_active_at > ACTIVITY_RESOLUTION:
        _agent_touch_enqueue(agent=agent, now=now)
    return token


# (agent id, created_at) -> monotonic time this process last asked the
# worker to record the agent's activity.  Only throttles that side effect: a
# busy agent would otherwise enqueue a task on every request until the
# worker catches up (or on every request at all when none runs).
_touch_enqueued: dict[tuple[int, datetime], float] = {}
_TOUCH_ENQUEUED_MAX = 10_000


def _agent_touch_enqueue(*, agent: Agent, now: datetime) -> None:
    key = (agent.pk, agent.created_at)
    at = time.monotonic()
    last = _touch_enqueued.get(key)
    if last is not None and at - last < ACTIVITY_RESOLUTION.total_seconds():
        return
    if len(_touch_enqueued) >= _TOUCH_ENQUEUED_MAX:
        _touch_enqueued.clear()
    _touch_enqueued[key] = at
    # Recorded by the worker, so authenticating never writes to the database.
    transaction.on_commit(partial(_agent_touch_send, agent.pk, now.isoformat()))


def _agent_touch_send(agent_id: int, at: str) -> None:
    """Queue the touch, once: with the broker down the request goes on, and
    this window's activity is not recorded (the next window's will be)."""
    try:
        agent_touch_task.apply_async((agent_id, at), retry=False)
    except Exception as exc:
        logger.warning("agent %s: activity not queued (%s)", agent_id, exc)


def agent_touch(*, agent_id: int, at: datetime) -> None:
    """Record that an agent was active at ``at`` (never moves time backwards)."""
    Agent.objects.filter(pk=agent_id).filter(
        Q(last_active_at__isnull=True) | Q(last_active_at__lt=at)
    ).update(last_active_at=at)
    AgentToken.objects.filter(agent_id=agent_id, revoked_at__isnull=True).update(
        last_used_at=at
    )


@transaction.atomic
def user_get_or_create(
    *, username: str, password: str | None = None
) -> tuple[AbstractBaseUser, bool]:
    user_model = get_user_model()
    user = user_model.objects.filter(username=username).first()
    if user is not None:
        return user, False
    user = user_model(username=username)
    if password:
        user.set_password(password)
    else:
        user.set_unusable_password()
    user.full_clean(exclude=["password"])
    user.save()
    return user, True


DEMO_CONSTELLATION = "Pattern"


@dataclass(frozen=True)
class DemoSeed:
    constellation: Constellation
    username: str
    password: str
    tokens: dict[str, str]


def demo_login_write(*, seed: DemoSeed) -> Path:
    """Keep the demo login in a file only its owner can read, so a partner
    who missed the line ``make run`` printed can still log in."""
    path = demo_login_path()
    path.write_text(f"{seed.username}\n{seed.password}\n")
    path.chmod(0o600)
    return path


@transaction.atomic
def demo_constellation_seed(
    *, username: str = "partner", password: str = ""
) -> DemoSeed | None:
    """Seed the demo constellation when the database has none; else None."""
    if Constellation.objects.exists():
        return None
    password = password or secrets.token_urlsafe(12)
    partner, _ = user_get_or_create(username=username, password=password)
    partner.is_staff = True
    partner.is_superuser = True
    partner.set_password(password)
    partner.save(update_fields=["is_staff", "is_superuser", "password"])
    constellation = constellation_create(name=DEMO_CONSTELLATION, partner=partner)
    tokens = {}
    for template in ROLE_TEMPLATES:
        _, issued = agent_create(
            constellation=constellation, name=template.name, role=template.role
        )
        tokens[template.name] = issued.raw
    return DemoSeed(constellation, username, password, tokens)


@transaction.atomic
def agent_update(
    *,
    agent: Agent,
    role: str | None = None,
    description: str | None = None,
    model_name: str | None = None,
    answered_by_llm: bool | None = None,
    is_active: bool | None = None,
    actor: Actor | None = None,
) -> Agent:
    """Change an agent's settings; ``answered_by_llm`` needs a model name
    (given here or already set)."""
    changes = {
        "role": role,
        "description": description,
        "model_name": None if model_name is None else model_name.strip(),
        "answered_by_llm": answered_by_llm,
        "is_active": is_active,
    }
    fields = [name for name, value in changes.items() if value is not None]
    was_active = agent.is_active
    for name in fields:
        setattr(agent, name, changes[name])
    if agent.answered_by_llm and not agent.model_name:
        raise InvalidInput(
            f"{agent.name} would be answered by the LLM with no model: set"
            " model_name (e.g. gpt-4o-mini) too, or leave answered_by_llm off",
            extra={"field": "model_name"},
        )
    agent.full_clean()
    agent.save(update_fields=fields)
    if agent.is_active != was_active:
        if not agent.is_active:
            # Its open sockets end (they check their tokens again).
            rights_revoke_send(agent_id=agent.pk)
        event_record(
            actor=actor or Actor.system(),
            agent=agent,
            event_type=(
                EventType.AGENT_ACTIVATED
                if agent.is_active
                else EventType.AGENT_DEACTIVATED
            ),
        )
    return agent
