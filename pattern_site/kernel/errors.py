"""The one hierarchy of domain errors.

Services and selectors raise these; ``pattern_site.api`` maps them to HTTP
once, the websocket consumers map them to protocol error codes once, and the
dashboard shows their message once.  A message says what was wrong and what
is allowed.
"""

from typing import Any

from django.core.exceptions import ValidationError


class ApplicationError(Exception):
    """Base of every error a user of the product may be shown."""

    status_code = 400
    code = "error"

    def __init__(self, message: str, *, extra: dict[str, object] | None = None):
        super().__init__(message)
        self.message = message
        self.extra = extra or {}


class NotFound(ApplicationError):
    status_code = 404
    code = "not_found"


class AuthenticationFailed(ApplicationError):
    status_code = 401
    code = "auth_failed"


class PermissionDenied(ApplicationError):
    status_code = 403
    code = "permission_denied"


class LimitExceeded(ApplicationError):
    status_code = 422
    code = "limit_exceeded"


class InvalidInput(ApplicationError):
    status_code = 422
    code = "invalid_input"


class Conflict(ApplicationError):
    status_code = 409
    code = "conflict"


class HistoryFolded(ApplicationError):
    """A past version whose content was folded away by history retention:
    its who, when and why are still listed, its content is not held."""

    status_code = 410
    code = "history_folded"


def full_clean(obj: Any, **kwargs: Any) -> None:
    """``obj.full_clean(**kwargs)``, its ``ValidationError`` as
    ``InvalidInput`` naming each field and what was wrong with it."""
    try:
        obj.full_clean(**kwargs)
    except ValidationError as exc:
        raise InvalidInput(
            "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
        ) from exc


class MalformedRequest(ApplicationError):
    """A request body that is not what every endpoint reads: a JSON object."""

    status_code = 400
    code = "malformed_body"
