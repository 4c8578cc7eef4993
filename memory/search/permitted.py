"""Which candidate rows a caller may receive, read in one compiled statement."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db import connection, connections
from django.db.models import Exists, OuterRef, QuerySet
from django.db.models.expressions import RawSQL

from pattern_site.kernel.db.compiled import MarkerSlots, RowReader

# Stands for the candidate ids in a compiled statement (PermittedRows).
_IDS_PARAM = object()


# The candidate ids, sent as one JSON array, as rows: by database vendor.
_IDS_SQL = {
    "sqlite": "SELECT value FROM json_each(%s)",
    "postgresql": "SELECT value::bigint FROM jsonb_array_elements_text(%s::jsonb)",
}


@dataclass(frozen=True)
class _PermittedStatement:
    """The compiled ``PermittedRows`` statements and how to read their rows:
    ``texts_sql`` selects (pk, content), ``rows_sql`` whole rows with their
    ``select_related`` rows; both take the same parameters."""

    texts_sql: str
    rows_sql: str
    params: tuple
    reader: RowReader


# Compiled statements by the SQL of the allowed queryset (the same
# permission and filters give the same statement); at most 256.
_STATEMENTS: dict[tuple, _PermittedStatement] = {}


_STATEMENTS_MAX = 256


def _permitted_statement(allowed: QuerySet) -> _PermittedStatement:
    """Compile ``pk IN (json_each(ids)) AND EXISTS (allowed row)``."""
    model = allowed.model
    inner = allowed.filter(pk=OuterRef("pk")).order_by().values("pk")
    ids_sql = _IDS_SQL[connections[allowed.db].vendor]
    outer = (
        model._default_manager.using(allowed.db)
        .filter(pk__in=RawSQL(ids_sql, (_IDS_PARAM,)))
        .filter(Exists(inner))
        .order_by()
    )
    texts_sql, texts_params = outer.values_list("pk", "content").query.sql_with_params()
    outer.query.select_related = allowed.query.select_related
    compiler = outer.query.get_compiler(using=outer.db)
    rows_sql, params = compiler.as_sql()  # EmptyResultSet: nothing is allowed
    if tuple(texts_params) != tuple(params):
        raise ValueError("the permitted texts and rows statements differ")
    return _PermittedStatement(
        texts_sql=texts_sql,
        rows_sql=rows_sql,
        params=tuple(params),
        reader=RowReader.of(compiler, outer.db),
    )


class PermittedRows:
    """The rows of ``allowed`` among candidate ids.

    ``pk IN (json_each(ids)) AND EXISTS (allowed row with that pk)``.  The
    ``EXISTS`` form keeps SQLite on the primary key
    (``allowed.filter(pk__in=ids)`` may make it walk an index of all the
    owner's rows when it has no stats), and ``json_each`` keeps the SQL
    text the same whatever the number of ids, so the statements are
    compiled once per permission and filters and SQLite's statement cache
    reuses them.  ``fetch`` reads the candidates' text only; ``instances``
    reads the whole rows (and their ``select_related`` rows) of those that
    reach the results and builds them the way Django's ``ModelIterable``
    does (Django 5.2): whole rows of all candidates cost four times their
    text.
    """

    def __init__(self, allowed: QuerySet):
        self._statement: _PermittedStatement | None = None
        self._params: tuple = ()
        self._allowed: Callable[[], QuerySet] = lambda: allowed
        self.empty = allowed.query.is_empty()
        if self.empty:
            return
        try:
            # The key is the SQL of the allowed rows' ids: their filters and
            # joins, without the columns and ordering (a third of the cost
            # of compiling the whole queryset on every search).
            ids_query = allowed.order_by().values("pk").query
            inner_sql, inner_params = ids_query.sql_with_params()
            key: tuple | None = (
                allowed.model,
                allowed.db,
                repr(allowed.query.select_related),
                inner_sql,
                tuple(inner_params),
            )
            hash(key)
        except EmptyResultSet:
            self.empty = True
            return
        except TypeError:  # a parameter that cannot be a key: no caching
            key = None
        statement = _STATEMENTS.get(key) if key is not None else None
        if statement is None:
            try:
                statement = _permitted_statement(allowed)
            except EmptyResultSet:
                self.empty = True
                return
            if key is not None:
                if len(_STATEMENTS) >= _STATEMENTS_MAX:
                    _STATEMENTS.pop(next(iter(_STATEMENTS)))
                _STATEMENTS[key] = statement
        self._statement, self._params = statement, statement.params

    @classmethod
    def _compiled(
        cls,
        statement: _PermittedStatement,
        params: list,
        allowed: Callable[[], QuerySet],
    ) -> PermittedRows:
        rows = cls.__new__(cls)
        rows._statement, rows._params, rows._allowed = statement, tuple(params), allowed
        rows.empty = False
        return rows

    def allowed(self) -> QuerySet:
        """The queryset of the rows the caller may receive."""
        return self._allowed()

    def _run(self, sql: str, ids: Sequence[int]) -> list[tuple]:
        st = self._statement
        assert st is not None
        ids_json = json.dumps(list(ids))
        params = [ids_json if p is _IDS_PARAM else p for p in self._params]
        with connection.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall()

    def fetch(self, ids: Sequence[int]) -> dict[int, str]:
        """The content of each permitted row among ``ids``, by id."""
        if self._statement is None or not ids:
            return {}
        return dict(self._run(self._statement.texts_sql, ids))

    def instances(self, ids: Sequence[int]) -> dict[int, Any]:
        """Model instances (with their related rows) of the permitted rows
        among ``ids``, by id: the same permission, checked again."""
        st = self._statement
        if st is None or not ids:
            return {}
        return {obj.pk: obj for obj in st.reader.instances(self._run(st.rows_sql, ids))}


class PermittedQuery:
    """``PermittedRows`` of a queryset built once, with marker values where
    its parameters go (as ``pattern_site.kernel.db.compiled.CompiledQuery``
    does): ``rows(**values)`` runs the compiled statements with the real
    values.  For a search's permission whose shape is always the same (an
    agent's own rows of a constellation), building the queryset and
    compiling its key cost more than the candidates' read.

    ``build(**markers)`` must give the same SQL shape whatever the values
    (no value may make it empty or change its joins); each marker an int or
    str that no other parameter equals.
    """

    def __init__(self, build: Callable[..., QuerySet], **markers: int | str) -> None:
        self._build = build
        self._markers = markers
        self._compiled: dict[str, tuple[_PermittedStatement, MarkerSlots]] = {}
        self._lock = threading.Lock()

    def _statement(self, db: str) -> tuple[_PermittedStatement, MarkerSlots]:
        found = self._compiled.get(db)
        if found is None:
            with self._lock:
                found = self._compiled.get(db)
                if found is None:
                    allowed = self._build(**self._markers).using(db)
                    if allowed.query.is_empty():
                        raise ValueError("a permitted query must not be empty")
                    statement = _permitted_statement(allowed)
                    found = (statement, MarkerSlots.of(statement.params, self._markers))
                    self._compiled[db] = found
        return found

    def rows(self, db: str = "default", **values: int | str) -> PermittedRows:
        """The rows the compiled permission lets through, for ``values``."""
        statement, slots = self._statement(db)
        return PermittedRows._compiled(
            statement,
            slots.filled(statement.params, values),
            lambda: self._build(**values).using(db),
        )
