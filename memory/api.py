"""Memory endpoints of the tool API (blocks, long-term memory, search)."""

from ninja import Router

router = Router(tags=["memory"])
