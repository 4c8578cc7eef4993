"""Groups of the demo agents, built through the services; the agent
tool registry's interface over a few test tools, for the tool loop."""

import json
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from coordination.groups import turns
from coordination.groups.services import group_create, group_member_add
from memory.blocks import tools as block_tools
from memory.blocks.schemas import CoreMemoryIn
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import ApplicationError
from tests.factories import AgentFactory

NAMES = ("Pattern", "Entropy", "Flux", "Momentum", "Anchor", "Archive")


@pytest.fixture
def agents(constellation: Any) -> dict[str, Any]:
    return {n: AgentFactory(constellation=constellation, name=n) for n in NAMES}


@pytest.fixture
def system() -> Actor:
    return Actor.system()


@pytest.fixture
def make_group(constellation: Any, agents: dict[str, Any]) -> Any:
    def make(
        pattern: str,
        members: list[tuple[str, str] | tuple[str, str, dict]],
        config: dict[str, Any] | None = None,
        name: str = "Group",
    ) -> Any:
        group = group_create(
            constellation=constellation,
            name=name,
            pattern=pattern,
            config=config or {},
        )
        for entry in members:
            extra = entry[2] if len(entry) > 2 else {}
            group_member_add(
                group=group, agent=agents[entry[0]], role=entry[1], **extra
            )
        return group

    return make


def config_ids(agents: dict[str, Any], **names: str) -> dict[str, int]:
    return {key: agents[value].pk for key, value in names.items()}


@dataclass(frozen=True)
class Result:
    ok: bool
    text: str
    value: Any = None


class Crash(BaseException):
    """The worker dying mid-call (not an error the loop could catch)."""


class Tools:
    """The registry's interface over test tools; counts what ran."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []
        self.crash_on: str = ""

    def tool_functions(self) -> list[dict[str, Any]]:
        # send_message is the registry's too; the loop runs it itself.
        names = ("core_memory_append", "lookup", "fail", "finish", "send_message")
        return [
            {
                "type": "function",
                "function": {"name": n, "description": n, "parameters": {}},
            }
            for n in names
        ]

    def tool_call(self, *, actor: Actor, name: str, arguments: dict) -> Result:
        self.ran.append((name, arguments))
        if name == self.crash_on:
            raise Crash
        try:
            if name == "core_memory_append":
                change = block_tools.core_memory_append_tool(
                    actor=actor, args=CoreMemoryIn(**arguments)
                )
                return Result(True, json.dumps(change, default=str))
        except ApplicationError as exc:
            return Result(False, exc.message)
        if name == "lookup":
            return Result(True, f"found {arguments.get('q')}")
        if name == "finish":
            return Result(True, "finished")
        return Result(False, "the tool broke")


@pytest.fixture
def tools(monkeypatch: pytest.MonkeyPatch) -> Tools:
    registry = Tools()
    monkeypatch.setattr(
        turns,
        "tool_registry",
        lambda: SimpleNamespace(
            tool_functions=registry.tool_functions, tool_call=registry.tool_call
        ),
    )
    return registry
