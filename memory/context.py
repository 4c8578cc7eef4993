"""The context builder: an agent's system prompt from its memory.

Order: base instructions, core blocks (and log blocks, always in context),
working blocks (pinned, or referenced by the request's batch block ids), the
sections other capabilities register (``context_section_register``: unread
handoffs, open files), the catch-up digest when the agent has been away,
``<recent_activity>``, then tool execution rules.  Each block renders as::

    <block:label permission="ReadWrite" shared_from="Archive">
    description (when enabled)
    rendered content
    </block:label>

Tokens are counted as ``memory.longterm.compose`` counts them (the model's
BPE encoding for OpenAI families, an estimate otherwise), within the
model's limits as the constellation overrides them.  When blocks exceed the
model's memory
budget, unpinned working blocks go first, then pinned ones; core blocks are
always kept and the overrun is reported in the metadata.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Literal

from django.conf import settings

from activity.stream.context import recent_activity_render
from activity.summaries.digest import catch_up_render
from memory.blocks.changes import BlockChangesSince, block_changes_for_agent
from memory.blocks.models import BlockType, MemoryBlock
from memory.blocks.permissions import block_permission_label
from memory.blocks.seen import blocks_seen_record_later
from memory.blocks.selectors import block_list_for_agent, block_shared_from
from memory.longterm.compose import (
    MESSAGE_OVERHEAD_TOKENS,
    HeldRows,
    HistoryConfig,
    estimate_tokens,
    history_compose,
    history_config_for,
    token_counter,
)
from memory.longterm.models import Conversation
from memory.longterm.selectors import conversation_latest
from memory.schemas import ContextBuildIn
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent
from pattern_site.kernel.agents.selectors import agent_get_private
from pattern_site.kernel.errors import InvalidInput

RuleKind = Literal[
    "start_constraint", "exit_loop", "continue_loop", "max_calls", "requires_prior"
]


@dataclass(frozen=True)
class ToolRule:
    tool: str
    kind: RuleKind
    value: int | str | None = None

    def render(self) -> str:
        if self.kind == "start_constraint":
            return f"- Call `{self.tool}` first before any other tools"
        if self.kind == "exit_loop":
            return f"- The conversation will end after calling `{self.tool}`"
        if self.kind == "continue_loop":
            return f"- The conversation will be continued after calling `{self.tool}`"
        if self.kind == "max_calls":
            return f"- Call `{self.tool}` at most {self.value} times"
        return f"- Call `{self.tool}` only after calling `{self.value}`"


def tool_rule_parse(raw: dict[str, Any]) -> ToolRule:
    kinds = RuleKind.__args__  # type: ignore[attr-defined]
    tool, kind, value = raw.get("tool"), raw.get("kind"), raw.get("value")
    if not isinstance(tool, str) or not tool or kind not in kinds:
        raise InvalidInput(f"a tool rule needs a 'tool' and a 'kind' in {kinds}")
    if kind == "max_calls" and not (isinstance(value, int) and value > 0):
        raise InvalidInput("a max_calls rule needs a positive integer 'value'")
    if kind == "requires_prior" and not (isinstance(value, str) and value):
        raise InvalidInput("a requires_prior rule needs the prior tool as 'value'")
    return ToolRule(tool=tool, kind=kind, value=value)


def render_tool_rules(rules: Iterable[ToolRule]) -> str:
    rules = list(rules)
    if not rules:
        return ""
    first = [r for r in rules if r.kind == "start_constraint"]
    rest = [r for r in rules if r.kind != "start_constraint"]
    return "\n".join(["# Tool Execution Rules", *(r.render() for r in first + rest)])


@dataclass
class Section:
    name: str
    text: str
    tokens: int
    blocks: list[str] = field(default_factory=list)


@dataclass
class BuiltContext:
    system_prompt: str
    sections: list[Section]
    metadata: dict[str, Any]
    # The whole request's messages, when asked for.
    request: list[dict[str, Any]] | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def render_block(*, actor: Actor, block: MemoryBlock, include_description: bool) -> str:
    permission = block_permission_label(actor=actor, block=block)
    attrs = f'permission="{permission}"'
    shared_from = block_shared_from(actor=actor, block=block)
    if shared_from:
        attrs += f' shared_from="{shared_from}"'
    lines = [f"<block:{block.label} {attrs}>"]
    if include_description and block.description:
        lines.append(block.description)
    if block.rendered:
        lines.append(block.rendered)
    lines.append(f"</block:{block.label}>")
    return "\n".join(lines)


def default_instructions(agent: Agent) -> str:
    text = (
        f"You are {agent.name}, an agent of the {agent.constellation.name} "
        "constellation."
    )
    if agent.role:
        text += f" Your role: {agent.role}."
    if agent.description:
        text += f"\n{agent.description}"
    return text


@dataclass(frozen=True)
class ContextSection:
    """A section another capability adds to every built context, after the
    working blocks: ``render(agent)`` returns its text ("" to leave it out)."""

    name: str
    render: Callable[[Agent], str]
    order: int


_SECTIONS: dict[str, ContextSection] = {}


def context_section_register(
    *, name: str, render: Callable[[Agent], str], order: int
) -> None:
    """Add a section to built contexts (from the registering app's
    ``AppConfig.ready``); sections render by ``order``, then name."""
    _SECTIONS[name] = ContextSection(name=name, render=render, order=order)


def _changes_lines(
    found: list[BlockChangesSince], *, since: datetime | None = None
) -> list[str]:
    """The changes ``found``, made at or after ``since``, as one line per
    block and author (how many changes, when the latest, its summary),
    newest first."""
    lines: list[tuple[datetime, str]] = []
    for entry in found:
        recent = [c for c in entry.changes if since is None or c.created_at >= since]
        # Older changes were left out of ``found``: some may be recent too.
        uncounted = entry.earlier and len(recent) == len(entry.changes)
        by_author: dict[tuple[str, str], list[Any]] = {}
        for change in recent:
            by_author.setdefault((change.actor_kind, change.actor_id), []).append(
                change
            )
        for changes in by_author.values():
            latest = changes[-1]
            count = len(changes)
            lines.append(
                (
                    latest.created_at,
                    f"- {entry.block.label}: {latest.actor_name} "
                    f"({latest.actor_kind}), {count} change"
                    f"{'s' if count != 1 else ''}, latest "
                    f"{latest.created_at:%Y-%m-%d %H:%M} UTC: {latest.summary}"
                    + (" (earlier changes not counted)" if uncounted else ""),
                )
            )
    lines.sort(key=lambda line: line[0], reverse=True)
    return [text for _, text in lines]


def changes_while_away_lines(agent: Agent, since: datetime, now: datetime) -> list[str]:
    """The catch-up digest's Memory Changes: the blocks ``agent`` can read
    that others changed since ``since`` and it has not received since (its
    looks, as for the memory_changes tool), one line per block and author,
    newest first.  Looks are not moved."""
    found = block_changes_for_agent(agent=agent, with_diffs=False)
    return _changes_lines(found, since=since)


def changes_since_render(agent: Agent) -> str:
    """``<changes_since_last_look>``: shared and constellation blocks others
    changed since ``agent`` last looked (a block it never looked at has no
    "since" and is left out), newest first, one line per block
    and author (how many changes, when the latest, its summary), within
    ``settings.MEMORY_CHANGES_CONTEXT_TOKENS``.  Looks are not moved: the
    agent takes the changes themselves with the memory_changes tool."""
    found = block_changes_for_agent(
        agent=agent, others_only=True, looked_only=True, with_diffs=False
    )
    lines = _changes_lines(found)
    if not lines:
        return ""
    head = (
        "<changes_since_last_look>\nOthers changed these shared blocks since "
        "you last looked (memory_changes shows what changed):"
    )
    tail = "</changes_since_last_look>"
    budget = settings.MEMORY_CHANGES_CONTEXT_TOKENS - estimate_tokens(head + tail)
    shown = []
    for line in lines:
        cost = estimate_tokens(line)
        if cost > budget:
            break
        shown.append(line)
        budget -= cost
    if not shown:
        return ""
    if len(shown) < len(lines):
        shown.append(f"- ({len(lines) - len(shown)} more not shown)")
    return "\n".join([head, *shown, tail])


def _others_section(
    earlier: BuiltContext | None,
    name: str,
    render: Callable[[Agent], str],
    agent: Agent,
) -> Section:
    for section in earlier.sections if earlier is not None else ():
        if section.name == name:
            return Section(name, section.text, 0)
    return Section(name, render(agent), 0)


def context_build(
    *,
    agent: Agent,
    batch_block_ids: Iterable[str] = (),
    base_instructions: str | None = None,
    tool_rules: Iterable[ToolRule] = (),
    model_name: str | None = None,
    include_descriptions: bool = True,
    history: HistoryConfig | None = None,
    others_from: BuiltContext | None = None,
) -> BuiltContext:
    """Build ``agent``'s system prompt; ``batch_block_ids`` (ids or labels)
    bring unpinned working blocks in for this request.  ``history``: the
    constellation's history settings, when the caller has read them.
    ``others_from``: an earlier build of this agent's context whose
    sections about what others did (the catch-up digest, recent activity)
    are kept as they were, for a rebuild after the agent's own writes,
    which those sections leave out."""
    actor = Actor.for_agent(agent)
    model = model_name if model_name is not None else agent.model_name
    history = history or history_config_for(constellation=agent.constellation_id)
    limits = history.limits(model)
    count = token_counter(model)
    batch = {str(b) for b in batch_block_ids}
    blocks = block_list_for_agent(agent=agent)
    core = [b for b in blocks if b.block_type in (BlockType.CORE, BlockType.LOG)]
    working = [
        b
        for b in blocks
        if b.block_type == BlockType.WORKING
        and (b.pinned or str(b.pk) in batch or b.label in batch)
    ]

    def rendered(block: MemoryBlock) -> str:
        return render_block(
            actor=actor, block=block, include_description=include_descriptions
        )

    core_texts = [rendered(b) for b in core]
    working_texts = {b.pk: rendered(b) for b in working}
    used = sum(count.count(t) for t in core_texts)
    kept, omitted = [], []
    # Pinned blocks before batch-only ones, each group by label.
    for block in sorted(working, key=lambda b: (not b.pinned, b.label)):
        cost = count.count(working_texts[block.pk])
        if used + cost <= limits.memory_tokens:
            kept.append(block)
            used += cost
        else:
            omitted.append(block.label)
    # The agent receives these blocks as they are now.
    blocks_seen_record_later(agent=agent, blocks=[*core, *kept])
    sections = [
        Section(
            "base_instructions", base_instructions or default_instructions(agent), 0
        ),
        Section("core_memory", "\n\n".join(core_texts), 0, [b.label for b in core]),
        Section(
            "working_memory",
            "\n\n".join(working_texts[b.pk] for b in kept),
            0,
            [b.label for b in kept],
        ),
        *(
            Section(extra.name, extra.render(agent), 0)
            for extra in sorted(_SECTIONS.values(), key=lambda x: (x.order, x.name))
        ),
        _others_section(others_from, "catch_up", catch_up_render, agent),
        _others_section(others_from, "activity", recent_activity_render, agent),
        Section("tool_rules", render_tool_rules(tool_rules), 0),
    ]
    for section in sections:
        section.tokens = count.count(section.text)
    prompt = "\n\n".join(s.text for s in sections if s.text)
    total = count.count(prompt)
    memory = sections[1].tokens + sections[2].tokens
    metadata = {
        "agent": agent.name,
        "model": model or "default",
        "model_name": model or "",
        "limits": asdict(limits),
        "estimated_tokens": total,
        "memory_tokens": memory,
        "memory_over_budget": memory > limits.memory_tokens,
        "tokens_by_section": {s.name: s.tokens for s in sections},
        "omitted_blocks": omitted,
        "token_estimate": count.kind,
    }
    return BuiltContext(system_prompt=prompt, sections=sections, metadata=metadata)


def request_compose(
    *,
    agent: Agent,
    built: BuiltContext,
    conversation: Conversation | None,
    active_batch_id: str = "",
    history: HistoryConfig | None = None,
    held: HeldRows | None = None,
) -> list[dict[str, Any]]:
    """The whole request's messages: the built system prompt, then the
    conversation's compressed history (the active batch whole), as the
    model gets them; ``built.metadata["history"]`` says what was kept.
    ``history``: the constellation's history settings, when read already;
    ``held``: the history rows this caller's earlier requests read."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": built.system_prompt}
    ]
    if conversation is not None:
        composed = history_compose(
            conversation=conversation,
            model_name=built.metadata["model_name"],
            active_batch_id=active_batch_id,
            config=history,
            held=held,
        )
        messages += composed.messages
        built.metadata["history"] = composed.metadata
    return messages


def request_tokens(built: BuiltContext) -> int:
    """The tokens of the request ``request_compose`` made from ``built``
    last, as counted while composing it: the system prompt and the history."""
    history = built.metadata.get("history") or {}
    return (
        MESSAGE_OVERHEAD_TOKENS
        + built.metadata["estimated_tokens"]
        + history.get("history_tokens", 0)
    )


def context_build_for_actor(*, actor: Actor, args: ContextBuildIn) -> BuiltContext:
    """The ``build_context`` tool (HTTP and MCP): the context of agent
    ``args.agent_id`` (agents: their own), when ``actor`` may read that
    agent's private memory; with ``include_request``, the messages of the
    request the agent's model would get now (system prompt, then its
    current conversation's compressed history)."""
    agent = agent_get_private(actor=actor, agent_id=args.agent_id)
    built = context_build(
        agent=agent,
        batch_block_ids=args.batch_block_ids,
        base_instructions=args.base_instructions,
        tool_rules=[tool_rule_parse(r.dict()) for r in args.tool_rules],
        model_name=args.model,
        include_descriptions=args.include_descriptions,
    )
    if args.include_request:
        conversation = conversation_latest(agent=agent)
        built.request = request_compose(
            agent=agent, built=built, conversation=conversation
        )
    return built
