"""Export a constellation to an archive and import one, whole or not at all.

Rows are read and written generically, over every concrete field of the
models in ``pattern_site.backup.registry``: a column added to one of them
travels without a change here.  Values are JSON (binary columns as
base64); ids are the source site's and are remapped on import, foreign
keys from ``_meta`` and the other ids from the registry's declarations.
Users are carried by username.  The search index tables are not copied:
imported rows are indexed again through the search engine's own paths,
with their vectors when the archive has them, embedded again when not.
"""

import base64
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import numpy as np
from django.db import models, transaction
from django.utils import timezone

from memory.search.index import index_put_vectors, index_vectors
from memory.search.pipeline import embedding_schedule, search_rows_reindex
from memory.search.registry import EmbeddingState, search_table_of
from pattern_site.backup.archive import (
    USERS,
    Archive,
    InvalidArchive,
    archive_read,
    archive_write,
    data_member,
)
from pattern_site.backup.registry import OWNED, USER, Owned, Ref, label, user_model
from pattern_site.kernel.agents.models import Agent, Constellation
from pattern_site.kernel.errors import Conflict

# The id maps of an import: model label -> {id in the archive: id here}.
IdMaps = dict[str, dict[Any, Any]]

VECTOR_KEY = "vector"


# --- rows as JSON -------------------------------------------------------------


def _encode(fld: models.Field, obj: models.Model) -> Any:
    value = fld.value_from_object(obj)
    if value is None or isinstance(fld, models.JSONField):
        return value
    if isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, bytes | memoryview | bytearray):
        return base64.b64encode(bytes(value)).decode()
    return fld.value_to_string(obj)


def row_encode(obj: models.Model) -> dict[str, Any]:
    """One row: its id, every concrete column, its many-to-many ids."""
    meta = obj._meta
    return {
        "pk": _encode(meta.pk, obj),
        "fields": {
            f.attname: _encode(f, obj)
            for f in meta.concrete_fields
            if not f.primary_key
        },
        "m2m": {
            f.name: sorted(
                _encode(f.target_field, o)
                for o in getattr(obj, f.name).all()  # type: ignore[attr-defined]
            )
            for f in meta.many_to_many
        },
    }


def constellation_rows(constellation: Constellation) -> dict[str, list[dict]]:
    """Every row of ``constellation``, by model label, in id order."""
    return {
        owned.label: [
            row_encode(obj)
            for obj in owned.rows(constellation)
            .order_by("pk")
            .prefetch_related(*(f.name for f in owned.model._meta.many_to_many))
        ]
        for owned in OWNED
    }


def _relations(model: type[models.Model]) -> Iterable[tuple[str, str, bool]]:
    """(column, target label, is primary key) of each foreign key."""
    for f in model._meta.concrete_fields:
        if f.is_relation and f.related_model is not None:
            yield f.attname, label(f.related_model), f.primary_key


# --- id remapping -------------------------------------------------------------


def _ref_remap(ref: Ref, value: Any, maps: IdMaps) -> Any:
    """``value`` naming a row of ``ref.target`` in the archive, named here;
    what names nothing (0, None, "") or nothing exported stays as it is."""
    if isinstance(value, list):
        return [_ref_remap(ref, v, maps) for v in value]
    known = maps.get(ref.target, {})
    if isinstance(value, bool) or not value:
        return value
    if isinstance(value, int):
        return known.get(value, value)
    if isinstance(value, str) and value.startswith(ref.prefix):
        rest = value[len(ref.prefix) :]
        if rest.isdigit() and int(rest) in known:
            return f"{ref.prefix}{known[int(rest)]}"
    return value


ACTOR_KINDS = {"agent": Ref(label(Agent)), "human": Ref(USER)}


def _actor_remap(kind: str, actor_id: str, maps: IdMaps) -> str:
    ref = ACTOR_KINDS.get(kind)
    return actor_id if ref is None else _ref_remap(ref, actor_id, maps)


def _json_remap(
    value: Any, keys: dict[str, Ref], keyed: dict[str, Ref], maps: IdMaps
) -> Any:
    if isinstance(value, list):
        return [_json_remap(v, keys, keyed, maps) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key in keyed and isinstance(item, dict):
            item = {
                str(_ref_remap(keyed[key], int(k), maps)) if k.isdigit() else k: v
                for k, v in item.items()
            }
        elif key in keys:
            item = _ref_remap(keys[key], item, maps)
        else:
            item = _json_remap(item, keys, keyed, maps)
        out[key] = item
    return out


def soft_refs_remap(owned: Owned, fields: dict[str, Any], maps: IdMaps) -> dict:
    """The columns of a row whose ids are not foreign keys, remapped."""
    out: dict[str, Any] = {}
    for column, ref in owned.ids.items():
        out[column] = _ref_remap(ref, fields[column], maps)
    for column in owned.actor_refs:
        kind, _, actor_id = (fields[column] or "").partition(":")
        if actor_id:
            out[column] = f"{kind}:{_actor_remap(kind, actor_id, maps)}"
    for kind_column, id_column in owned.actor_pairs:
        out[id_column] = _actor_remap(fields[kind_column], fields[id_column], maps)
    for kind_column, id_column, refs in owned.object_pairs:
        ref = refs.get(fields[kind_column])
        if ref is not None:
            out[id_column] = _ref_remap(ref, fields[id_column], maps)
    for column in owned.json_ids.keys() | owned.json_keyed.keys():
        out[column] = _json_remap(
            fields[column],
            owned.json_ids.get(column, {}),
            owned.json_keyed.get(column, {}),
            maps,
        )
    return out


def relations_remap(
    model: type[models.Model], fields: dict[str, Any], maps: IdMaps
) -> dict[str, Any]:
    """The foreign-key columns of a row, remapped (unknown ids: None)."""
    return {
        column: None if fields[column] is None else maps[target].get(fields[column])
        for column, target, primary in _relations(model)
        if not primary
    }


def row_remap(
    owned: Owned, row: dict[str, Any], maps: IdMaps
) -> tuple[Any, dict[str, Any], dict[str, list]]:
    """A row's (id, columns, many-to-many ids) with every id remapped."""
    meta = owned.model._meta
    fields = {
        **row["fields"],
        **relations_remap(owned.model, row["fields"], maps),
        **soft_refs_remap(owned, row["fields"], maps),
    }
    m2m = {
        f.name: sorted(
            maps[label(f.related_model)].get(v) for v in row["m2m"].get(f.name, [])
        )
        for f in meta.many_to_many
    }
    return maps[owned.label].get(row["pk"]), fields, m2m


# --- export -------------------------------------------------------------------


def _users(rows: dict[str, list[dict]]) -> list[dict[str, Any]]:
    """The users the rows name (columns, many-to-many, actor refs)."""
    ids: set[int] = set()
    marker: IdMaps = {USER: _Recorder(ids)}
    for owned in OWNED:
        user_columns = [c for c, t, _p in _relations(owned.model) if t == USER]
        m2m_users = [
            f.name
            for f in owned.model._meta.many_to_many
            if label(f.related_model) == USER
        ]
        for row in rows[owned.label]:
            ids.update(row["fields"][c] for c in user_columns if row["fields"][c])
            for name in m2m_users:
                ids.update(row["m2m"][name])
            soft_refs_remap(owned, row["fields"], marker)
    users = user_model().objects.filter(pk__in=ids).order_by("pk")
    return [
        {
            "pk": u.pk,
            "username": u.get_username(),
            "email": getattr(u, "email", ""),
            "first_name": getattr(u, "first_name", ""),
            "last_name": getattr(u, "last_name", ""),
        }
        for u in users
    ]


class _Recorder(dict):
    """An id map that remembers the ids asked for and changes none."""

    def __init__(self, seen: set[int]) -> None:
        super().__init__()
        self.seen = seen

    def __contains__(self, key: object) -> bool:
        if isinstance(key, int):
            self.seen.add(key)
        return False

    def get(self, key: Any, default: Any = None) -> Any:
        if isinstance(key, int):
            self.seen.add(key)
        return default


def _vectors_add(rows: dict[str, list[dict]]) -> None:
    for owned in OWNED:
        table = search_table_of(owned.model)
        if table is None or not rows[owned.label]:
            continue
        vectors = index_vectors(
            table.index, row_ids=[r["pk"] for r in rows[owned.label]]
        )
        for row in rows[owned.label]:
            vector = vectors.get(row["pk"])
            if vector is not None:
                row[VECTOR_KEY] = base64.b64encode(
                    np.asarray(vector, dtype=np.float32).tobytes()
                ).decode()


@dataclass(frozen=True)
class ExportSummary:
    constellation: str
    counts: dict[str, int]


def constellation_export(
    *, constellation: Constellation, out: BinaryIO, vectors: bool = True
) -> ExportSummary:
    """Write everything of ``constellation`` but its agents' tokens to ``out``.

    ``vectors``: include the search vectors (else the importing site embeds
    the rows again).
    """
    with transaction.atomic():
        # One transaction: a consistent view of every table.
        rows = constellation_rows(constellation)
        if vectors:
            _vectors_add(rows)
        users = _users(rows)
    counts = {model_label: len(r) for model_label, r in rows.items()}
    members: dict[str, Any] = {USERS: users}
    members.update({data_member(k): v for k, v in rows.items()})
    archive_write(
        out,
        manifest={
            "constellation": constellation.name,
            "exported_at": timezone.now().isoformat(),
            "vectors": vectors,
            "counts": counts,
        },
        members=members,
    )
    return ExportSummary(constellation=constellation.name, counts=counts)


# --- import -------------------------------------------------------------------


@dataclass
class ImportResult:
    constellation: Constellation
    counts: dict[str, int] = field(default_factory=dict)
    agents: list[str] = field(default_factory=list)
    users_created: list[str] = field(default_factory=list)
    reembed: int = 0


def _user_map(
    archive: Archive, *, partner: Any | None, result: ImportResult
) -> dict[Any, Any]:
    User = user_model()
    partner_id = archive.rows(label(Constellation))[0]["fields"]["partner_id"]
    mapping: dict[Any, Any] = {}
    for entry in archive.members[USERS]:
        if partner is not None and entry["pk"] == partner_id:
            mapping[entry["pk"]] = partner.pk
            continue
        user = User.objects.filter(username=entry["username"]).first()
        if user is None:
            user = User(
                username=entry["username"],
                **{
                    k: entry[k]
                    for k in ("email", "first_name", "last_name")
                    if hasattr(User, k)
                },
            )
            # A moved-in person sets a password (or is given one) here.
            user.set_unusable_password()
            user.save()
            result.users_created.append(user.get_username())
        mapping[entry["pk"]] = user.pk
    return mapping


def _instance(
    model: type[models.Model], row: dict[str, Any], fields: dict[str, Any]
) -> models.Model:
    obj = model()
    for f in model._meta.concrete_fields:
        if f.primary_key:
            continue
        value = fields[f.attname]
        setattr(obj, f.attname, None if value is None else f.to_python(value))
    return obj


def _pk_assign(owned: Owned, obj: models.Model, row: dict, maps: IdMaps) -> None:
    pk = owned.model._meta.pk
    for column, target, primary in _relations(owned.model):
        if primary:
            setattr(obj, column, maps[target][row["pk"]])
            return
    if isinstance(pk, models.UUIDField):
        # A block keeps its id (and its links) unless this site has it.
        taken = owned.model.objects.filter(pk=row["pk"]).exists()
        obj.pk = uuid.uuid4() if taken else pk.to_python(row["pk"])


def _rows_insert(
    owned: Owned, archive: Archive, maps: IdMaps, name: str | None
) -> None:
    model = owned.model
    known = maps.setdefault(owned.label, {})
    for row in archive.rows(owned.label):
        fields = {**row["fields"], **relations_remap(model, row["fields"], maps)}
        for column, target, primary in _relations(model):
            if target == owned.label:
                fields[column] = None
            elif (
                not primary
                and row["fields"][column] is not None
                and (fields[column] is None)
            ):
                raise InvalidArchive(
                    f"{owned.label} row {row['pk']} names {target}"
                    f" {row['fields'][column]}, which the archive lacks"
                )
        if model is Constellation and name:
            fields["name"] = name
        obj = _instance(model, row, fields)
        _pk_assign(owned, obj, row, maps)
        # raw: columns as exported (auto_now and defaults not applied).
        obj.save_base(raw=True, force_insert=True)
        known[row["pk"]] = obj.pk if not isinstance(obj.pk, uuid.UUID) else str(obj.pk)


def _after_insert(owned: Owned, archive: Archive, maps: IdMaps) -> None:
    """Ids only known once every row is in: self references, soft refs,
    many-to-many links."""
    model = owned.model
    for row in archive.rows(owned.label):
        new_pk, fields, m2m = row_remap(owned, row, maps)
        # Self references were inserted empty, the other ids as exported.
        changed = {
            column: fields[column]
            for column, target, primary in _relations(model)
            if target == owned.label and not primary and fields[column] is not None
        }
        changed.update(
            (column, value)
            for column, value in soft_refs_remap(owned, row["fields"], maps).items()
            if value != row["fields"][column]
        )
        if changed:
            model.objects.filter(pk=new_pk).update(**changed)
        for name, ids in m2m.items():
            if ids:
                getattr(model.objects.get(pk=new_pk), name).set(ids)


def _search_restore(archive: Archive, maps: IdMaps, result: ImportResult) -> None:
    for owned in OWNED:
        table = search_table_of(owned.model)
        rows = archive.rows(owned.label)
        if table is None or not rows:
            continue
        index = table.index
        new_ids = [maps[owned.label][r["pk"]] for r in rows]
        search_rows_reindex(kind=table.kind, row_ids=new_ids)
        with_vectors, pending = [], []
        current = {
            r["pk"]: r
            for r in owned.model.objects.filter(pk__in=new_ids).values(
                "pk", index.scope_column, index.owner_column
            )
        }
        for row, new_id in zip(rows, new_ids, strict=True):
            f = row["fields"]
            ready = (
                f["embedding_state"] == EmbeddingState.READY
                and f["embedded_hash"] == f["content_hash"]
            )
            if ready and VECTOR_KEY in row:
                vector = np.frombuffer(
                    base64.b64decode(row[VECTOR_KEY]), dtype=np.float32
                )
                c = current[new_id]
                with_vectors.append(
                    (new_id, c[index.scope_column], c[index.owner_column], vector)
                )
            else:
                pending.append(new_id)
        index_put_vectors(index, rows=with_vectors)
        owned.model.objects.filter(pk__in=pending).update(
            embedding_state=EmbeddingState.PENDING, embedded_hash=""
        )
        embedding_schedule(kind=table.kind, row_ids=pending)
        result.reembed += len(pending)


def constellation_import(
    *,
    source: BinaryIO | bytes,
    rename: str | None = None,
    partner: Any | None = None,
) -> ImportResult:
    """Import an archive of ``constellation_export``: all of it or nothing.

    ``rename``: the constellation's name here (its name must be free);
    ``partner``: the user who becomes its partner (default: the archive's
    partner, by username, created if missing).
    """
    archive = archive_read(source)
    roots = archive.rows(label(Constellation))
    if len(roots) != 1:
        raise InvalidArchive("the archive holds no constellation")
    name = (rename or roots[0]["fields"]["name"]).strip()
    if not name:
        raise InvalidArchive("a constellation needs a name")
    with transaction.atomic():
        if Constellation.objects.filter(name=name).exists():
            raise Conflict(
                f"a constellation named {name!r} already exists here; import it"
                " under another name (--rename NEW_NAME, or the new name field)"
            )
        result = ImportResult(constellation=Constellation())
        maps: IdMaps = {USER: _user_map(archive, partner=partner, result=result)}
        for owned in OWNED:
            _rows_insert(owned, archive, maps, name)
        for owned in OWNED:
            _after_insert(owned, archive, maps)
        _search_restore(archive, maps, result)
        result.constellation = Constellation.objects.get(
            pk=maps[label(Constellation)][roots[0]["pk"]]
        )
        result.counts = {o.label: len(archive.rows(o.label)) for o in OWNED}
        result.agents = list(
            result.constellation.agents.order_by("name").values_list("name", flat=True)
        )
    return result
