"""The six coordination patterns, by the name a group stores."""

from coordination.groups.patterns.base import Pattern
from coordination.groups.patterns.dynamic import Dynamic
from coordination.groups.patterns.pipeline import Pipeline
from coordination.groups.patterns.round_robin import RoundRobin
from coordination.groups.patterns.sleeptime import Sleeptime
from coordination.groups.patterns.supervisor import Supervisor
from coordination.groups.patterns.voting import Voting
from pattern_site.kernel.errors import InvalidInput

PATTERNS: dict[str, Pattern] = {
    p.name: p
    for p in (Supervisor(), RoundRobin(), Voting(), Pipeline(), Dynamic(), Sleeptime())
}


def pattern_get(name: str) -> Pattern:
    try:
        return PATTERNS[name]
    except KeyError:
        raise InvalidInput(
            f"unknown coordination pattern {name!r}; one of: {', '.join(PATTERNS)}"
        ) from None
