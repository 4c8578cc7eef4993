"""Plain INSERT/UPDATE statements for hot write paths, built once per model.

Every raw SQL statement of the site outside the search index (which keeps
its own, ``memory.search``) and migrations is here or in this package.

The ORM's statement building costs more than these statements on the block
write path, so they are built once per model, fields and database vendor,
with each field's own conversion (``get_db_prep_save``), and run through
Django's connection (its transaction; in a transaction, one cursor of it:
``compiled.statement_run``).
"""

from __future__ import annotations

import functools
import operator
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, models
from django.db.backends.base.operations import BaseDatabaseOperations as BaseOperations
from django.db.models import F, Field, Model, QuerySet
from django.db.models.expressions import RawSQL
from django.db.models.sql import UpdateQuery

from pattern_site.kernel.db.compiled import (
    CompiledQuery,
    MarkerSlots,
    statement_run,
    transaction_key,
)


def _connection() -> Any:
    return connections[DEFAULT_DB_ALIAS]


@functools.cache
def _insert_columns(
    model: type[Model], names: tuple[str, ...], vendor: str
) -> tuple[str, list[Field]]:
    """INSERT of the named fields of ``model``, one row of placeholders."""
    meta = model._meta
    fields = [meta.get_field(name) for name in names]
    quote = _connection().ops.quote_name
    sql = (
        f"INSERT INTO {quote(meta.db_table)} "
        f"({', '.join(quote(f.column) for f in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))})"
    )
    return sql, fields


@functools.cache
def _insert_statement(
    model: type[Model], vendor: str, rows: int = 1
) -> tuple[str, _Columns]:
    """INSERT of ``rows`` rows of every concrete field but the auto id,
    returning the new ids where the database can."""
    conn = _connection()
    meta = model._meta
    names = tuple(f.name for f in meta.concrete_fields if not f.primary_key)
    sql, fields = _insert_columns(model, names, vendor)
    row = sql[sql.index(" VALUES ") + len(" VALUES ") :]
    sql += f", {row}" * (rows - 1)
    if conn.features.can_return_columns_from_insert:
        sql += f" RETURNING {conn.ops.quote_name(meta.pk.column)}"
    return sql, _columns(fields)


# Fields whose preparation for the database (``get_db_prep_save``) gives a
# string back unchanged, on every backend, and those that give an int back
# unchanged where the backend does not adapt ints (PostgreSQL's psycopg 3
# wraps them): the Django classes themselves, not subclasses, which may
# prepare otherwise.
_STRINGS = (models.CharField, models.TextField)
_INTS = (
    models.IntegerField,
    models.BigIntegerField,
    models.SmallIntegerField,
    models.PositiveIntegerField,
    models.PositiveBigIntegerField,
    models.PositiveSmallIntegerField,
)


# Integer keys, which a foreign key to them prepares as they would (an
# agent's or a constellation's id).
_INT_KEYS = (models.AutoField, models.BigAutoField, models.SmallAutoField, *_INTS)


# (the type its values keep, how other values are prepared), per column
_Kind = tuple[type | None, Callable[[Any, Any], Any]]


@dataclass(frozen=True)
class _Columns:
    """The columns of a statement built once: ``values`` reads their
    attributes off an instance in one call (deferred fields included, as
    ``getattr`` would), ``kinds`` says how each value is prepared."""

    values: Callable[[Model], tuple[Any, ...]]
    kinds: tuple[_Kind, ...]


def _kept(field: Field, ints: bool, blobs: bool) -> type | None:
    """The type whose values ``field`` prepares as they are, if any (bytes
    where the driver's ``Binary``, which binary fields wrap their values in,
    is a plain view of them: SQLite's)."""
    kind = type(field)
    if kind in _STRINGS:
        return str
    if blobs and kind is models.BinaryField:
        return bytes
    if not ints:
        return None
    if kind in _INTS:
        return int
    if kind is models.ForeignKey and type(field.target_field) in _INT_KEYS:
        return int
    return None


def _preparer(field: Field) -> Callable[[Any, Any], Any]:
    """How ``field`` prepares a value for the database: its
    ``get_db_prep_save``, except for the values whose preparation comes
    down to one step: an aware datetime of a Django ``DateTimeField`` (the
    backend's adaptation; the field's own steps only check for naive values
    and convert other types), and a UUID of a ``UUIDField``, or of a foreign
    key to one, where the database has no UUID type (its hex digits)."""
    kind = type(field)
    target = field.target_field if kind is models.ForeignKey else field
    if type(target) is models.UUIDField:

        def prepare(value: Any, conn: Any) -> Any:
            if type(value) is uuid.UUID and not conn.features.has_native_uuid_field:
                return value.hex
            return field.get_db_prep_save(value, conn)

        return prepare
    if kind is not models.DateTimeField:
        return field.get_db_prep_save

    def prepare_datetime(value: Any, conn: Any) -> Any:
        if type(value) is not datetime or value.tzinfo is None:
            return field.get_db_prep_save(value, conn)
        # A change stores its one moment twice (the update row's creation,
        # the block's last change): the last one prepared is kept, held so
        # that its identity cannot be reused.
        last = _last_moment[0]
        if last[0] is value and last[1] is conn:
            return last[2]
        prepared = conn.ops.adapt_datetimefield_value(value)
        _last_moment[0] = (value, conn, prepared)
        return prepared

    return prepare_datetime


# [(datetime, connection, its preparation for that connection)]: the last
# aware datetime prepared (see _preparer).
_last_moment: list[tuple[Any, Any, Any]] = [(None, None, None)]


def _columns(fields: list[Field]) -> _Columns:
    conn = _connection()
    ops = type(conn.ops)
    ints = ops.adapt_integerfield_value is BaseOperations.adapt_integerfield_value
    blobs = conn.Database.Binary is memoryview
    names = [f.attname for f in fields]
    values = (
        operator.attrgetter(*names)
        if len(names) > 1
        else lambda instance: (getattr(instance, names[0]),)
    )
    kinds = tuple((_kept(f, ints, blobs), _preparer(f)) for f in fields)
    return _Columns(values, kinds)


def _prepared(instance: Model, columns: _Columns, conn: Any) -> list[Any]:
    """The values of ``columns`` of ``instance``, each prepared for the
    database by its field, except the strings and ints that preparation
    would give back as they are: a hot write's values cost few calls."""
    values = list(columns.values(instance))
    for i, (kept, prepare) in enumerate(columns.kinds):
        value = values[i]
        if type(value) is not kept:
            values[i] = prepare(value, conn)
    return values


@functools.cache
def _update_statement(
    model: type[Model], names: tuple[str, ...], vendor: str
) -> tuple[str, _Columns]:
    """UPDATE of the named fields of ``model``'s row by key; its columns
    are those fields' and then the key's."""
    meta = model._meta
    fields = [meta.get_field(name) for name in names]
    quote = _connection().ops.quote_name
    sets = ", ".join(f"{quote(f.column)} = %s" for f in fields)
    sql = f"UPDATE {quote(meta.db_table)} SET {sets} WHERE {quote(meta.pk.column)} = %s"
    return sql, _columns([*fields, meta.pk])


@functools.cache
def _range_statement(
    model: type[Model], parent: str, field: str, vendor: str
) -> tuple[str, Field, Field]:
    meta = model._meta
    quote = _connection().ops.quote_name
    pk, target, parent_field = (
        meta.pk.column,
        meta.get_field(field),
        meta.get_field(parent),
    )
    sql = (
        f"UPDATE {quote(meta.db_table)} SET {quote(target.column)} = %s "
        f"WHERE {quote(parent_field.column)} = %s "
        f"AND {quote(pk)} > %s AND {quote(pk)} <= %s"
    )
    return sql, target, parent_field


def row_insert(instance: Model) -> int:
    """INSERT ``instance`` (every concrete field but the auto id); its id."""
    conn = _connection()
    sql, columns = _insert_statement(type(instance), conn.vendor)
    values = _prepared(instance, columns, conn)
    if conn.features.can_return_columns_from_insert:
        return statement_run(conn, sql, values, "fetchone")[0]
    with conn.cursor() as cursor:
        cursor.execute(sql, values)
        meta = instance._meta
        return conn.ops.last_insert_id(cursor, meta.db_table, meta.pk.column)


def instances_insert(instances: Sequence[Model]) -> None:
    """INSERT ``instances``, all of one model (every concrete field but the
    auto id, as it is: no field's ``pre_save``, so an ``auto_now`` field is
    set first), in one statement where the database returns the new ids
    (as many as the database's limit on parameters allows: one statement
    per such batch); each gets its id and is saved, as ``bulk_create``
    leaves it."""
    if not instances:
        return
    conn = _connection()
    if not conn.features.can_return_rows_from_bulk_insert:
        for instance in instances:
            instance.pk = row_insert(instance)
    else:
        model = type(instances[0])
        fields = [f for f in model._meta.concrete_fields if not f.primary_key]
        size = max(1, conn.ops.bulk_batch_size(fields, instances))
        for start in range(0, len(instances), size):
            batch = instances[start : start + size]
            sql, columns = _insert_statement(model, conn.vendor, len(batch))
            values = [v for i in batch for v in _prepared(i, columns, conn)]
            with conn.cursor() as cursor:
                cursor.execute(sql, values)
                ids = [row[0] for row in cursor.fetchall()]
            for instance, pk in zip(batch, ids, strict=True):
                instance.pk = pk
    for instance in instances:
        instance._state.adding, instance._state.db = False, conn.alias


def rows_insert(model: type[Model], names: tuple[str, ...], rows: list[tuple]) -> None:
    """INSERT ``rows`` into ``model``'s table, each the values of the fields
    ``names`` in that order, already prepared for the database (ints and
    strings as they are): one statement run for every row, with no model
    instance, for the many small rows of a hot write path."""
    conn = _connection()
    sql, _ = _insert_columns(model, names, conn.vendor)
    with conn.cursor() as cursor:
        cursor.executemany(sql, rows)


@functools.cache
def _add_statement(
    model: type[Model], key: tuple[str, ...], fields: tuple[str, ...], vendor: str
) -> str:
    meta = model._meta
    quote = _connection().ops.quote_name
    columns = [quote(meta.get_field(name).column) for name in key]
    counters = [quote(meta.get_field(name).column) for name in fields]
    table = quote(meta.db_table)
    sets = ", ".join(f"{n} = {table}.{n} + excluded.{n}" for n in counters)
    return (
        f"INSERT INTO {table} ({', '.join(columns + counters)}) "
        f"VALUES ({', '.join(['%s'] * (len(columns) + len(counters)))}) "
        f"ON CONFLICT ({', '.join(columns)}) DO UPDATE SET {sets}"
    )


def rows_add(
    model: type[Model],
    *,
    key: tuple[str, ...],
    field: str | tuple[str, ...],
    rows: list[tuple],
) -> None:
    """Add to the counter ``field`` (or each of the counters ``field``) of
    the rows of ``model`` whose fields ``key`` (a unique constraint) hold
    each row's first values, the last values of each row being the amounts;
    a row missing is created with them (SQLite and PostgreSQL alike), in
    one statement.  Values already prepared for the database."""
    conn = _connection()
    fields = (field,) if isinstance(field, str) else field
    with conn.cursor() as cursor:
        cursor.executemany(_add_statement(model, key, fields, conn.vendor), rows)


def row_update(instance: Model, names: tuple[str, ...]) -> int:
    """UPDATE the named fields of ``instance``'s row to its values; the
    number of rows changed (0 or 1)."""
    conn = _connection()
    sql, columns = _update_statement(type(instance), names, conn.vendor)
    return statement_run(conn, sql, _prepared(instance, columns, conn))  # type: ignore[no-any-return]


def rows_set_in_range(
    model: type[Model],
    *,
    parent: str,
    parent_id: Any,
    field: str,
    value: Any,
    after: int,
    upto: int,
) -> None:
    """Set ``field`` to ``value`` on the rows of ``model`` whose ``parent``
    is ``parent_id`` and whose id is in (``after``, ``upto``]."""
    conn = _connection()
    sql, target, parent_field = _range_statement(model, parent, field, conn.vendor)
    key = parent_field.target_field.get_db_prep_value(parent_id, conn)
    statement_run(conn, sql, [target.get_db_prep_save(value, conn), key, after, upto])


@functools.cache
def _size_statement(
    model: type[Model], key: str, field: str, vendor: str
) -> tuple[str, Field]:
    meta = model._meta
    quote = _connection().ops.quote_name
    key_field, target = meta.get_field(key), meta.get_field(field)
    sql = (
        f"SELECT LENGTH({quote(target.column)}) FROM {quote(meta.db_table)} "
        f"WHERE {quote(key_field.column)} = %s"
    )
    return sql, key_field


def row_field_size(model: type[Model], *, key: str, value: Any, field: str) -> int:
    """Bytes in binary ``field`` of the row of ``model`` whose ``key`` is
    ``value`` (0 without a row); the database reads the length, not the
    bytes."""
    conn = _connection()
    sql, key_field = _size_statement(model, key, field, conn.vendor)
    row = statement_run(
        conn, sql, [key_field.get_db_prep_value(value, conn)], "fetchone"
    )
    return (row[0] or 0) if row else 0


def rows_fetch(queryset: Any) -> list[tuple]:
    """A values_list queryset's rows as plain tuples, fetched in one go.

    For columns that need no converter: the ORM's chunked iterator costs a
    third of a long listing.
    """
    sql, params = queryset.query.sql_with_params()
    with _connection().cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


@functools.cache
def locked_row_query(model: type[Model], defer: tuple[str, ...] = ()) -> CompiledQuery:
    """``model``'s row by primary key, locked for the transaction (SQLite:
    the IMMEDIATE transaction's write lock; PostgreSQL: ``FOR UPDATE``),
    without the fields ``defer``, compiled once.  The key goes in already
    prepared for the database."""
    return CompiledQuery(
        lambda pk: (
            model.objects.select_for_update()
            .defer(*defer)
            .filter(pk=RawSQL("%s", (pk,)))
            .order_by()
        ),
        pk="\x00pk",
    )


def row_lock(model: type[Model], pk: Any, *, defer: tuple[str, ...] = ()) -> Any:
    """The locked row of ``model`` with key ``pk``, or None; marked as
    locked (:func:`row_is_locked`).  Fields in ``defer`` are not read: the
    instance reads one when it is first used, as Django's deferred fields
    do."""
    conn = _connection()
    row = locked_row_query(model, defer).first(
        pk=model._meta.pk.get_db_prep_value(pk, conn)
    )
    return row if row is None else row_mark_locked(row)


def row_mark_locked(instance: Model) -> Model:
    """Mark ``instance``, just read under its row lock (a query with
    ``select_for_update``; on SQLite any read in the IMMEDIATE transaction),
    as locked for the rest of the current transaction; returns it."""
    instance._state.locked_in = transaction_key(_connection())  # type: ignore[attr-defined]
    return instance


def row_is_locked(instance: Model) -> bool:
    """Whether ``instance`` was read under its row lock in the transaction
    now running (:func:`row_mark_locked`), so that a write may use it as the
    locked row without reading it again."""
    key = getattr(instance._state, "locked_in", None)
    return key is not None and key is transaction_key(_connection())


class CompiledIncrement:
    """``UPDATE ... SET field = field + 1 WHERE <filter> RETURNING pk, field``
    for the rows ``build(**markers)`` selects, compiled once per database as
    ``CompiledQuery`` compiles a read (the same markers); ``run(**values)``
    moves the counter and returns each moved row's key and new value, in
    one statement (SQLite 3.35 and later, PostgreSQL), or no row when the
    filter matches none.  On PostgreSQL the update locks each row it moves
    for the transaction, as ``select_for_update`` would."""

    def __init__(
        self, build: Callable[..., QuerySet], field: str, **markers: int | str
    ) -> None:
        self._build = build
        self._field = field
        self._markers = markers
        self._statements: dict[str, tuple[str, tuple, MarkerSlots]] = {}
        self._lock = threading.Lock()

    def _compile(self, db: str) -> tuple[str, tuple, MarkerSlots]:
        queryset = self._build(**self._markers).using(db)
        query = queryset.query.chain(UpdateQuery)
        query.add_update_values({self._field: F(self._field) + 1})
        query.annotations = {}
        sql, params = query.get_compiler(using=db).as_sql()
        meta = queryset.model._meta
        quote = connections[db].ops.quote_name
        sql += (
            f" RETURNING {quote(meta.pk.column)},"
            f" {quote(meta.get_field(self._field).column)}"
        )
        return sql, tuple(params), MarkerSlots.of(params, self._markers)

    def run(self, db: str = "default", **values: Any) -> list[tuple]:
        statement = self._statements.get(db)
        if statement is None:
            with self._lock:
                statement = self._statements.get(db) or self._compile(db)
                self._statements[db] = statement
        sql, params, slots = statement
        with connections[db].cursor() as cursor:
            cursor.execute(sql, slots.filled(params, values))
            return cursor.fetchall()
