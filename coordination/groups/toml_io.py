"""A group's configuration as a TOML document, and back.

The document has a ``[group]`` table (name, description, pattern), a
``[config]`` table (the pattern's configuration with agents by name:
``leader``, ``intervention_agent``, ``stages[].agents``) and one
``[[members]]`` table per member.  TOML has no null: an absent key takes
the pattern's default.
"""

import tomllib
from typing import Any

import tomli_w

from pattern_site.kernel.errors import InvalidInput


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value if v is not None]
    return value


def document_dumps(document: dict[str, Any]) -> str:
    return tomli_w.dumps(_without_none(document))


def document_loads(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(f"the group document is not valid TOML: {exc}") from None
