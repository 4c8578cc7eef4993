"""Types shared by every router of the tool API: bounded integers, block
labels and the one error shape.

SQLite (and PostgreSQL's bigint) store integers in 64 bits; a larger value
reaching the ORM is an ``OverflowError`` deep inside a query.  ``Id``,
``Offset`` and ``Cursor`` refuse such values at the edge with a 422 naming
the allowed range, and show that range in the OpenAPI document.

Every error under ``/api/`` is an :class:`ErrorOut`; endpoints declare the
statuses they can answer with :func:`error_responses`.
"""

import re
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Any, get_args

from ninja import Schema
from ninja.schema import DjangoGetter
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationInfo,
    model_validator,
)

from pattern_site.kernel.errors import InvalidInput

DB_INT_MAX = 2**63 - 1

# Primary keys and other ids: positive and within a database integer.
Id = Annotated[int, Field(ge=1, le=DB_INT_MAX)]

# Offsets into a listing, and cursors ("after"/"before" a row id or position).
Offset = Annotated[int, Field(ge=0, le=DB_INT_MAX)]

# Every string and list of a request has a declared maximum, checked while
# the body is read, before an endpoint (and so any transaction) runs; the
# OpenAPI document shows it.  Fields with a limit of their own in the
# domain (a title, a block's characters) use that one; the rest use these.
NAME_MAX = 100  # a name, key, field or section
LINE_MAX = 1_000  # a line: a description, a reason, a query
TEXT_MAX = 1_000_000  # a whole text: the largest block a schema allows
ITEMS_MAX = 100  # a list of names or ids


def _iso_text(value: Any) -> Any:
    # Lax parsing would read a number, or a string of digits (every query
    # parameter is a string), as seconds since 1970.
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not re.match(r"\d{4}-\d{2}-\d{2}", value):
        raise ValueError("must be an ISO 8601 date-time string")
    return value


def _moment_in_range(value: datetime) -> datetime:
    # A moment whose UTC time falls outside year 1..9999 (9999-12-31T23:59
    # at -14:00) cannot be compared with stored times; naive means UTC.
    try:
        if value.tzinfo is not None:
            value.astimezone(UTC)
        value + timedelta(days=1)
        value - timedelta(days=1)
    except OverflowError:
        raise ValueError("must be between 0001-01-02 and 9999-12-30 in UTC") from None
    return value


def _day_text(value: Any) -> Any:
    # As for moments: only a "YYYY-MM-DD" string is a day, never a number.
    if isinstance(value, date):
        return value
    if not isinstance(value, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        raise ValueError("must be a date as YYYY-MM-DD")
    return value


# A calendar day (a filter's first or last day, both included).
Day = Annotated[date, Field(strict=False), BeforeValidator(_day_text)]


# A datetime filter: any ISO 8601 time whose UTC time and neighbouring days
# exist in the calendar.
Moment = Annotated[
    datetime,
    Field(strict=False),
    BeforeValidator(_iso_text),
    AfterValidator(_moment_in_range),
]

# A block label is rendered into the prompt as ``<block:label ...>``, so it
# keeps to characters that can never close or break that tag.
# Not dots alone: '.' and '..' read as paths (an export's file names, URLs).
LABEL_PATTERN = r"^(?!\.+$)[\w.-]{1,100}$"
LABEL_RULE = "letters, digits, '_', '-' and '.' (not only dots), 1-100 characters"


def label_check(label: str) -> str:
    """``label`` if it keeps to ``LABEL_PATTERN``, else ``InvalidInput``."""
    if not re.fullmatch(LABEL_PATTERN, label):
        raise InvalidInput(f"a block label has {LABEL_RULE}; got {label!r}")
    return label


def _label_field(label: str) -> str:
    try:
        return label_check(label)
    except InvalidInput as exc:
        raise ValueError(exc.message) from None


Label = Annotated[
    str,
    AfterValidator(_label_field),
    Field(
        max_length=100,
        description=f"{LABEL_RULE.capitalize()}.",
        json_schema_extra={"pattern": LABEL_PATTERN},
    ),
]


class DictSchema(Schema):
    """A schema validating a dict as it is: ninja's ``Schema`` wraps every
    input in a ``DjangoGetter`` (for resolvers, and model attributes such as
    managers and files) and validates it again, which a dict of plain
    values - a request body, a service's answer - does not need.  Any other
    input, or a schema with resolvers, is validated as ninja does."""

    @model_validator(mode="wrap")
    @classmethod
    def _run_root_validator(
        cls, values: Any, handler: ModelWrapValidatorHandler[Any], info: ValidationInfo
    ) -> Any:
        # Same name as ninja's, which this replaces.
        if isinstance(values, dict) and not cls._ninja_resolvers:
            return handler(values)
        config = cls.model_config
        if config.get("extra") == "forbid" or config.get("validate_assignment"):
            # As ninja: an unknown field shows on the input, not its getter.
            handler(values)
        return handler(DjangoGetter(values, cls, info.context))


class InputSchema(DictSchema):
    """Base of every request body schema.

    Strict: a JSON value is taken as the type it is, so ``0`` is not
    ``false`` and ``false`` is not ``0.0``; a nested object must be an
    object.  (Date-times, read from ISO strings, opt out per field.)

    Closed: a field the schema does not name is refused
    (``extra_forbidden``), never ignored, since a misspelt field would
    otherwise do something else than asked; the OpenAPI document says
    ``additionalProperties: false``.  :func:`accepted_fields` names the
    fields a schema does take, for the error message.
    """

    model_config = ConfigDict(strict=True, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _an_object(cls, data: Any) -> Any:
        # ninja hands its schemas their input wrapped in a DjangoGetter.
        raw = data._obj if isinstance(data, DjangoGetter) else data
        if isinstance(raw, dict | BaseModel):
            return data
        raise ValueError("must be a JSON object")


def accepted_fields(schema: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    """The field names (as sent: aliases) ``schema`` takes at ``loc``, a
    path of field names and list indexes inside it; [] when ``loc`` does not
    lead to a schema."""
    for part in loc:
        if isinstance(part, int):
            continue
        fields = {f.alias or name: f for name, f in schema.model_fields.items()}
        field = fields.get(part)
        inner = _model_in(field.annotation) if field else None
        if inner is None:
            return []
        schema = inner
    return [f.alias or name for name, f in schema.model_fields.items()]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    # The one schema inside ``X``, ``X | None`` or ``list[X]``.
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    models = [m for arg in get_args(annotation) if (m := _model_in(arg))]
    return models[0] if len(models) == 1 else None


class FieldErrorOut(Schema):
    loc: list[str | int] = Field(
        description="Where: 'body', 'query' or 'path', then the field path.",
        examples=[["body", "label"]],
    )
    msg: str = Field(examples=["String should match pattern '^[\\w.-]{1,100}$'"])
    type: str = Field(examples=["string_pattern_mismatch"])


class ErrorOut(Schema):
    """Every error of the tool API.  Some errors add facts of their own
    (a limit error: ``block``, ``size``, ``limit``, ``change_size``), which
    the schema allows as further properties."""

    detail: str = Field(examples=["no block 'notes' for agent Entropy"])
    code: str = Field(
        description="Stable machine-readable kind: not_found, invalid_input, "
        "validation_error, auth_required, auth_failed, permission_denied, "
        "conflict, limit_exceeded, malformed_body, payload_too_large, "
        "too_many_files, method_not_allowed.",
        examples=["not_found"],
    )
    errors: list[FieldErrorOut] | None = Field(
        None, description="validation_error: one entry per invalid field."
    )


# What every authenticated endpoint can answer besides its own statuses:
# no or a bad credential (401), an invalid parameter or field (422).  An
# endpoint with a body adds a body that is not a JSON object (400), a
# session's write without its CSRF token (403) and a body past the size
# limit (413).
COMMON_ERRORS = (401, 422)
BODY_ERRORS = (400, 403, 413)


def error_responses(*codes: int, body: bool) -> dict[int, Any]:
    """``response=`` entries: ``codes``, the common errors and, with a
    request ``body``, the body errors; each an :class:`ErrorOut`."""
    every = {*COMMON_ERRORS, *codes, *(BODY_ERRORS if body else ())}
    return {code: ErrorOut for code in sorted(every)}


def number_text(text: str) -> int | None:
    """The whole number written in ``text``, or None: ASCII digits only
    (``isdigit`` also takes '²', which ``int`` refuses) and within a
    database integer."""
    text = text.strip()
    if not (text.isascii() and text.isdigit()):
        return None
    value = int(text)
    return value if value <= DB_INT_MAX else None
