"""Querysets compiled once and run many times with new parameters.

On the hot paths of the tool API (token check, block by label) Django's
query building and compiling cost several times the query itself.  A
``CompiledQuery`` builds its queryset once, with marker values where the
parameters go, keeps the SQL and where each marker landed among its
parameters, and from then on runs the statement with the real values,
building model instances (with their ``select_related`` rows and each
field's converters) the way Django's ``ModelIterable`` does (``RowReader``,
also used by ``memory.search.permitted.PermittedRows``; Django 5.2 internals:
``compiler.klass_info``, ``apply_converters`` and ``get_related_populators``).

Markers are ints and strings, which reach the parameters unchanged on
SQLite and PostgreSQL (a marker may land in several places, e.g. an agent
named in a filter and in a subquery: each gets the value); the values
passed to ``first`` go into the statement as they are (an id, not a
model).  A field whose preparation changes the
value (a UUID key) takes its marker through ``RawSQL("%s", (marker,))`` and
its value already prepared (``field.get_db_prep_value``).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from django.db import connections
from django.db.models import Model, QuerySet
from django.db.models.base import ModelState
from django.db.models.fields.related_descriptors import ForeignKeyDeferredAttribute
from django.db.models.query import ModelIterable, get_related_populators
from django.db.models.query_utils import DeferredAttribute
from django.db.models.signals import post_init, pre_init


@dataclass(frozen=True)
class RowReader:
    """How to turn the raw rows of a compiled statement into model instances
    with their ``select_related`` rows, as Django's ``ModelIterable`` does."""

    compiler: Any
    model: type[Model]
    db: str
    start: int
    end: int
    init_list: list[str]
    populators: list
    # Django's per-column converters (None: ``results_iter`` works them out,
    # e.g. for composite keys).
    converters: dict | None
    # The queryset's annotations: attribute name to column.
    annotations: dict[str, int]

    @classmethod
    def of(cls, compiler: Any, db: str) -> RowReader:
        """For a compiler whose ``as_sql`` has run."""
        klass_info = compiler.klass_info
        fields = klass_info["select_fields"]
        start, end = fields[0], fields[-1] + 1
        columns = [col[0] for col in compiler.select[: compiler.col_count]]
        return cls(
            compiler=compiler,
            model=klass_info["model"],
            db=db,
            start=start,
            end=end,
            init_list=[col[0].target.attname for col in compiler.select[start:end]],
            populators=get_related_populators(klass_info, compiler.select, db),
            converters=None
            if compiler.has_composite_fields(columns)
            else compiler.get_converters(columns),
            annotations=dict(compiler.annotation_col_map or {}),
        )

    def instances(self, rows: list[tuple]) -> Iterator[Model]:
        """Model instances of ``rows``.  Rows that reference the same related
        row share its instance (ten search hits of one agent build one
        agent, not ten): treat the related instances as read-only."""
        converted = (
            self.compiler.results_iter(results=[rows])
            if self.converters is None
            else self.compiler.apply_converters(rows, self.converters)
        )
        shared: dict[tuple[int, Any], Model] = {}
        for row in converted:
            obj = model_from_db(
                self.model, self.db, self.init_list, row[self.start : self.end]
            )
            for populator in self.populators:
                _populate_shared(populator, row, obj, shared)
            for name, column in self.annotations.items():
                setattr(obj, name, row[column])
            yield obj


# Per model: its concrete fields' attribute names when ``model_from_db`` may
# fill an instance's ``__dict__`` itself, else None; ``_UNSEEN`` for a model
# not looked at yet.
_PLAIN: dict[type[Model], tuple[str, ...] | None] = {}
_UNSEEN = ("",)


def _plain_attnames(model: type[Model]) -> tuple[str, ...] | None:
    """The attribute names ``Model.__init__`` would set from a full row, if
    setting them is only storing each in ``__dict__``: no ``__init__`` or
    ``from_db`` of the model's own, and each attribute Django's plain
    deferred descriptor (a foreign key's forgets a cached related instance
    when its id changes, and a new instance has none)."""
    if model.__init__ is not Model.__init__ or (
        model.from_db.__func__ is not Model.from_db.__func__  # type: ignore[attr-defined]
    ):
        return None
    names = tuple(f.attname for f in model._meta.concrete_fields)
    for name in names:
        if type(model.__dict__.get(name)) not in (
            DeferredAttribute,
            ForeignKeyDeferredAttribute,
        ):
            return None
    return names


def _plain_names(model: type[Model]) -> tuple[str, ...] | None:
    """``model``'s attribute names (``_plain_attnames``) when an instance of
    it may be built now without ``Model.__init__``; None when it may not,
    or while an init signal has a receiver for it."""
    names = _PLAIN.get(model, _UNSEEN)
    if names is _UNSEEN:
        names = _PLAIN[model] = _plain_attnames(model)
    if (
        names is None
        or (pre_init.receivers and pre_init.has_listeners(model))
        or (post_init.receivers and post_init.has_listeners(model))
    ):
        return None
    return names


def _bare(model: type[Model], values: Any) -> Model:
    """An instance of ``model`` holding ``values`` (attribute name, value)
    in its ``__dict__``, built without ``Model.__init__``."""
    obj = model.__new__(model)
    obj._state = ModelState()
    obj.__dict__.update(values)
    return obj


def model_from_db(
    model: type[Model], db: str, field_names: list[str], values: Any
) -> Model:
    """``model.from_db(db, field_names, values)``, the same instance built
    without ``Model.__init__`` when that would only store each value: on
    the tool API's hot path (token, block) its argument handling, per-field
    ``setattr`` and init signals were a good part of reading a row.  Any
    other case (init signal receivers, a model's own ``__init__``) goes
    through ``from_db``."""
    names = _plain_names(model)
    if names is not None and len(field_names) != len(names):
        # Deferred fields are left out of ``__dict__``, as ``Model.__init__``
        # leaves them: their descriptors read them on first use.
        names = (
            tuple(field_names) if _attname_set(names).issuperset(field_names) else None
        )
    if names is None:
        return model.from_db(db, field_names, values)
    obj = _bare(model, zip(names, values, strict=True))
    obj._state.adding = False
    obj._state.db = db
    return obj


@functools.cache
def _attname_set(names: tuple[str, ...]) -> frozenset[str]:
    return frozenset(names)


def model_new(model: type[Model], values: dict[str, Any]) -> Model:
    """A new instance of ``model`` (not saved) holding ``values``, which name
    every concrete field by attribute name: ``model(**values)`` without
    ``Model.__init__`` when that would only store each value (as
    :func:`model_from_db`), for the rows a hot write path inserts."""
    names = _plain_names(model)
    if names is None or values.keys() != _attname_set(names):
        return model(**values)
    return _bare(model, values)


def _populate_shared(
    populator: Any, row: tuple, obj: Model, shared: dict[tuple[int, Any], Model]
) -> None:
    """Django's ``RelatedPopulator.populate`` (5.2), building each related
    row once per call.  Safe for one-to-one links too: a unique key cannot
    repeat across rows."""
    if populator.reorder_for_init:
        data = populator.reorder_for_init(row)
    else:
        data = row[populator.cols_start : populator.cols_end]
    pk = data[populator.pk_idx]
    related = None
    if pk is not None:
        key = (id(populator), pk)
        related = shared.get(key)
        if related is None:
            related = model_from_db(
                populator.model_cls, populator.db, populator.init_list, data
            )
            for nested in populator.related_populators:
                _populate_shared(nested, row, related, shared)
            shared[key] = related
    populator.local_setter(obj, related)
    if related is not None:
        populator.remote_setter(related, obj)


def statement_run(
    conn: Any, sql: str, params: list[Any], fetch: str | None = None
) -> Any:
    """Run one statement of a hot path on ``conn``: the rows ``fetch``
    (``"fetchone"``, ``"fetchall"``) reads, or without it the rows changed.

    In a transaction, every statement run here goes through one database
    cursor of that transaction (:func:`_transaction_cursor`) inside Django's
    database error translation, instead of a new ``CursorWrapper`` per
    statement: on the block write path Django's cursor and its per-statement
    wrappers cost more Python than the statement.  Whenever Django's
    wrappers do more than translate errors (queries logged, as
    ``assertNumQueries`` and ``DEBUG`` log them; execute wrappers; a
    transaction that must roll back, which Django refuses to run; a
    connection shared between threads), or outside a transaction, the
    statement goes through Django's cursor as any other."""
    cursor = _transaction_cursor(conn)
    if cursor is None:
        with conn.cursor() as cursor:
            cursor.execute(sql, params)
            return getattr(cursor, fetch)() if fetch else cursor.rowcount
    with conn.wrap_database_errors:
        cursor.execute(sql, params)
        if not fetch:
            return cursor.rowcount
        # Every row is read, even for one: the cursor outlives the
        # statement, and SQLite keeps a statement with rows left unread
        # (and its read of the database) open until the cursor runs
        # another or is closed.
        rows = cursor.fetchall()
    if fetch == "fetchall":
        return rows
    return rows[0] if rows else None


def _transaction_cursor(conn: Any) -> Any:
    """The database cursor of ``conn``'s current transaction (made on first
    use), or None when a statement must go through Django's cursor (see
    :func:`statement_run`); the transaction is told apart from the next by
    :func:`transaction_key`."""
    if (
        not conn.in_atomic_block
        or conn.needs_rollback
        or conn.execute_wrappers
        or conn.queries_logged
        or conn.allow_thread_sharing
    ):
        return None
    key = transaction_key(conn)
    held = conn.__dict__.get("_transaction_cursor")
    if held is not None and held[0] is key:
        return held[1]
    with conn.wrap_database_errors:
        cursor = conn.create_cursor()
    conn._transaction_cursor = (key, cursor)
    return cursor


def transaction_key(conn: Any) -> object | None:
    """An object that stays the same while the connection's current
    transaction lasts and is never the same once it has ended, or None
    outside a transaction.  Django (5.2 internals) gives the connection a
    new list of on-commit callbacks whenever a transaction commits or rolls
    back, and when a savepoint rolls back (where this key ends too early,
    which costs a new cursor or a read, never a stale one); a key holds its
    list, so a later list cannot reuse its identity."""
    return conn.run_on_commit if conn.in_atomic_block else None


@dataclass(frozen=True)
class MarkerSlots:
    """Where each marker landed among a compiled statement's parameters."""

    slots: dict[str, tuple[int, ...]]
    # The slots whose marker the driver wrapped (psycopg's Int8 for a big
    # integer column: an int subclass it adapts by type), with the wrapper.
    wrapped: dict[int, type]

    @classmethod
    def of(cls, params: Any, markers: dict[str, int | str]) -> MarkerSlots:
        slots = {}
        for name, marker in markers.items():
            found = tuple(
                i
                for i, p in enumerate(params)
                # psycopg's integer wrappers (Int8 for a big integer
                # column) subclass int: the driver adapts by that type.
                if isinstance(p, type(marker)) and p == marker
            )
            if not found:
                raise ValueError(f"marker {name}={marker!r} is not a parameter")
            slots[name] = found
        wrapped = {
            slot: type(params[slot])
            for found in slots.values()
            for slot in found
            if type(params[slot]) not in (int, bool) and isinstance(params[slot], int)
        }
        return cls(slots=slots, wrapped=wrapped)

    def filled(self, params: tuple, values: dict[str, Any]) -> list:
        """``params`` with each marker replaced by its value."""
        filled = list(params)
        for name, value in values.items():
            for slot in self.slots[name]:
                wrap = self.wrapped.get(slot)
                filled[slot] = wrap(value) if wrap and type(value) is int else value
        return filled


@dataclass(frozen=True)
class _Statement:
    sql: str
    params: tuple
    slots: MarkerSlots
    # None for a ``values_list`` queryset: its rows are tuples, through
    # ``values`` (the compiler and its per-column converters).
    reader: RowReader | None
    values: tuple[Any, dict] | None


class CompiledQuery:
    """``build(**markers)`` compiled on first use; ``first(**values)`` and
    ``all(**values)`` run it (``first_row`` for a ``values_list`` queryset).

    ``markers`` maps each parameter name to a marker value of its kind
    (int or str) that no other value of the query equals.
    """

    def __init__(self, build: Callable[..., QuerySet], **markers: int | str) -> None:
        self._build = build
        self._markers = markers
        self._statements: dict[str, _Statement] = {}
        self._lock = threading.Lock()

    def _compile(self, db: str) -> _Statement:
        qs = self._build(**self._markers).using(db)
        compiler = qs.query.get_compiler(using=db)
        sql, params = compiler.as_sql()
        models = issubclass(qs._iterable_class, ModelIterable)
        slots = MarkerSlots.of(params, self._markers)
        return _Statement(
            sql=sql,
            params=tuple(params),
            slots=slots,
            reader=RowReader.of(compiler, db) if models else None,
            values=(
                compiler,
                compiler.get_converters(
                    [col[0] for col in compiler.select[: compiler.col_count]]
                ),
            )
            if not models
            else None,
        )

    def _statement(self, db: str) -> _Statement:
        statement = self._statements.get(db)
        if statement is None:
            with self._lock:
                statement = self._statements.get(db) or self._compile(db)
                self._statements[db] = statement
        return statement

    def _execute(self, db: str, values: dict[str, Any], fetch: str) -> Any:
        st = self._statement(db)
        params = st.slots.filled(st.params, values)
        return st, statement_run(connections[db], st.sql, params, fetch)

    def first(self, db: str = "default", **values: Any) -> Any:
        """The first row as a model instance (related rows attached), or None."""
        st, row = self._execute(db, values, "fetchone")
        if row is None:
            return None
        assert st.reader is not None, "a values queryset: use first_row or rows"
        return next(st.reader.instances([row]))

    def first_row(self, db: str = "default", **values: Any) -> tuple | None:
        """The first row of a ``values_list`` queryset, or None."""
        st, row = self._execute(db, values, "fetchone")
        return None if row is None else _converted(st, [row])[0]

    def rows(self, db: str = "default", **values: Any) -> list[tuple]:
        """Every row of a ``values_list`` queryset."""
        st, rows = self._execute(db, values, "fetchall")
        return _converted(st, rows) if rows else []

    def all(self, db: str = "default", **values: Any) -> list[Any]:
        """Every row as a model instance (related rows attached)."""
        st, rows = self._execute(db, values, "fetchall")
        assert st.reader is not None, "a values queryset: use first_row or rows"
        return list(st.reader.instances(rows)) if rows else []


def _converted(st: _Statement, rows: list[tuple]) -> list[tuple]:
    """``values_list`` rows through each column's converters, as Django's
    ``ValuesListIterable`` does."""
    assert st.values is not None, "a model queryset: use first or all"
    compiler, converters = st.values
    if not converters:
        return rows
    return [tuple(row) for row in compiler.apply_converters(rows, converters)]
