"""Open the library (run its migrations) and read and write entries.

Every write is one transaction: it is stored whole or not at all. SQL goes through
SQLAlchemy expressions, so every value a user typed is a bound parameter.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.util.exc import CommandError
from sqlalchemy import (
    Engine,
    String,
    create_engine,
    delete,
    event,
    func,
    or_,
    select,
    type_coerce,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session

from library.entries import (
    EntryInfo,
    Saved,
    check_content,
    check_facts,
    check_figures,
    check_kind,
    check_name,
    check_notes,
    check_text,
    content_hash,
    current_user,
)
from library.errors import LibraryError, LibraryUnavailable, NameTaken, NotFound
from library.location import configured_url, shown_url
from library.schema import Entry, ValidationFigure

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
CONNECT_TIMEOUT_S = 5
"""How long to wait for a database server to answer before saying it does not."""
SQLITE_BUSY_MS = 30_000
"""How long an SQLite writer waits for another one to finish."""
_MIGRATION_LOCK = 0x5BEC_0001
"""PostgreSQL advisory lock key: two servers starting at once migrate one after the other."""
READ_ONLY = "specplan_read_only"
"""Execution option of a connection that only reads (SQLite then begins without a lock)."""
_INFO_COLUMNS = [c for c in Entry.__table__.c if c.key != "content"]


def _first_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    return (str(orig).strip().splitlines() or [type(orig).__name__])[0][:300]


def _sqlite_engine(url) -> Engine:
    path = url.database
    if path and path != ":memory:":
        folder = Path(path).expanduser().parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LibraryUnavailable(
                f"cannot create the library's folder {folder} ({exc.strerror or exc}); set "
                "SPECPLAN_DB_URL to a file where you may write"
            ) from None
    engine = create_engine(url, connect_args={"check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection, _record) -> None:
        # SQLAlchemy then issues BEGIN itself (below): pysqlite's own deferred BEGIN lets
        # two writers deadlock on the read-to-write lock upgrade.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_MS}")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection) -> None:
        # A writer takes the write lock at BEGIN; a reader (WAL) never waits for one.
        reading = connection.get_execution_options().get(READ_ONLY, False)
        connection.exec_driver_sql("BEGIN" if reading else "BEGIN IMMEDIATE")

    return engine


def make_engine(url: str) -> Engine:
    """An engine for an SQLite file or a PostgreSQL server; LibraryUnavailable otherwise."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise LibraryUnavailable(
            f"'{shown_url(url)}' is not a database URL ({exc}); use sqlite:///path or "
            "postgresql+psycopg://user@host/db"
        ) from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(parsed)
    if backend == "postgresql":
        return create_engine(
            parsed, connect_args={"connect_timeout": CONNECT_TIMEOUT_S}, pool_pre_ping=True
        )
    raise LibraryUnavailable(
        f"'{backend}' databases are not supported; use sqlite:///path or "
        "postgresql+psycopg://user@host/db"
    )


def migrate(engine: Engine, revision: str = "head") -> None:
    """Run the Alembic migrations up to `revision`, in one transaction."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        if engine.dialect.name == "postgresql":
            connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})")
        cfg.attributes["connection"] = connection
        command.upgrade(cfg, revision)


def open_library(url: str | None = None) -> Library:
    """The library at `url` (default: `SPECPLAN_DB_URL`, else the SQLite file under the
    user's data directory), its schema upgraded to the newest revision.

    Raises LibraryUnavailable, saying why, when it cannot be opened; a file that is not a
    database is left as it is."""
    url = url or configured_url()
    if url is None:
        raise LibraryUnavailable("the library is switched off (SPECPLAN_DB_URL=off)")
    engine = make_engine(url)
    where = shown_url(url)
    try:
        migrate(engine)
    except CommandError as exc:
        engine.dispose()
        raise LibraryUnavailable(
            f"{where} has a schema this copy of SpecPlan does not know ({exc}); update SpecPlan"
        ) from None
    except (DBAPIError, OSError) as exc:
        engine.dispose()
        detail = _first_line(exc)
        if "not a database" in detail or "malformed" in detail:
            raise LibraryUnavailable(
                f"{where} is not a readable SQLite database ({detail}); it was left as it "
                "is: move it aside to start a new library, or restore a backup"
            ) from None
        raise LibraryUnavailable(f"cannot open {where}: {detail}") from None
    return Library(engine, where)


def _matches(text: str):
    """Name, device, model, engine or notes holds `text`, any case; `%` and `_` are
    the characters themselves, not LIKE's wildcards."""
    columns = (Entry.name, Entry.device, Entry.model, Entry.engine, Entry.notes)
    return or_(*(c.icontains(text, autoescape=True) for c in columns))


def _info(row) -> EntryInfo:
    values = dict(row._mapping)
    for key in ("created_at", "updated_at"):
        if values[key] is not None and values[key].tzinfo is None:
            values[key] = values[key].replace(tzinfo=UTC)
    values["facts"] = values["facts"] or {}
    return EntryInfo(**values)


class Library:
    """Named entries in one database. Safe to share between threads (one engine, a
    session per call)."""

    def __init__(self, engine: Engine, where: str):
        self.engine = engine
        self.where = where
        """The database, as it may be shown (no password)."""

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def _write(self, what: str) -> Iterator[Session]:
        """One transaction; a database error becomes a LibraryError (nothing written)."""
        try:
            with Session(self.engine) as session, session.begin():
                yield session
        except (IntegrityError, LibraryError):
            raise
        except SQLAlchemyError as exc:
            raise LibraryError(
                f"the database refused to {what} ({_first_line(exc)}); nothing was changed"
            ) from None

    def _read(self, statement):
        try:
            with self.engine.connect() as connection:
                connection.execution_options(**{READ_ONLY: True})
                return connection.execute(statement).all()
        except SQLAlchemyError as exc:
            raise LibraryUnavailable(f"cannot read {self.where}: {_first_line(exc)}") from None

    # ---------------------------------------------------------------- writing
    def save(
        self,
        kind: str,
        name: str,
        content: bytes,
        *,
        notes: str = "",
        who: str | None = None,
        device: str = "",
        model: str = "",
        engine: str = "",
        engine_version: str = "",
        model_version: str = "",
        facts: dict | None = None,
        figures: dict[str, float] | None = None,
    ) -> Saved:
        """Keep `content` under `name`. The same content already kept (same kind) is not
        stored again: the result says `existed` and names the entry that holds it.
        Raises NameTaken when another entry of the kind has the name."""
        kind, name, notes = check_kind(kind), check_name(name), check_notes(notes)
        content = check_content(content)
        who = check_text(who, "who", 200) if who else current_user()
        digest = content_hash(content)
        facts, figures = check_facts(facts or {}), check_figures(figures or {})
        row = Entry(
            kind=kind,
            name=name,
            notes=notes,
            created_by=who,
            created_at=datetime.now(UTC),
            content_hash=digest,
            size_bytes=len(content),
            content=content,
            device=check_text(device, "device", 200),
            model=check_text(model, "model", 500),
            engine=check_text(engine, "engine", 64),
            engine_version=check_text(engine_version, "engine_version", 64),
            model_version=check_text(model_version, "model_version", 64),
            facts=facts,
            figures=[ValidationFigure(metric=m, value=v) for m, v in figures.items()],
        )
        try:
            with self._write(f"save {kind} '{name}'") as session:
                same = session.scalar(
                    select(Entry.id).where(Entry.kind == kind, Entry.content_hash == digest)
                )
                if same is None:
                    session.add(row)
        except IntegrityError as exc:
            same, refused = None, exc
        else:
            refused = None
        found = self._find(kind, content_hash=digest)
        if found is not None:
            return Saved(found, existed=same is not None or found.name != name)
        raise self._taken(kind, name, refused)

    def _taken(self, kind: str, name: str, exc: IntegrityError | None = None) -> LibraryError:
        """NameTaken when an entry of the kind holds `name`; else the database's own
        reason for refusing (a constraint other than the name's)."""
        holder = self._find(kind, name=name)
        if holder is None and exc is not None:
            return LibraryError(
                f"the database refused to save {kind} '{name}' ({_first_line(exc)}); "
                "nothing was saved"
            )
        when = f"{holder.created_at:%Y-%m-%d %H:%M}" if holder else ""
        by = f" (saved by {holder.created_by} at {when} UTC)" if holder else ""
        return NameTaken(
            f"a {kind} named '{name}' is already kept{by}; nothing was saved: choose another name",
            field="name",
        )

    def rename(self, kind: str, name: str, new_name: str) -> EntryInfo:
        new_name = check_name(new_name)
        try:
            with self._write(f"rename {kind} '{name}'") as session:
                done = session.execute(
                    update(Entry)
                    .where(Entry.kind == kind, Entry.name == name)
                    .values(name=new_name, updated_at=datetime.now(UTC))
                )
                if done.rowcount == 0:
                    raise self._missing(kind, name)
        except IntegrityError:
            raise self._taken(kind, new_name) from None
        return self.get(kind, new_name)

    def annotate(self, kind: str, name: str, notes: str) -> EntryInfo:
        notes = check_notes(notes)
        with self._write(f"annotate {kind} '{name}'") as session:
            done = session.execute(
                update(Entry)
                .where(Entry.kind == kind, Entry.name == name)
                .values(notes=notes, updated_at=datetime.now(UTC))
            )
            if done.rowcount == 0:
                raise self._missing(kind, name)
        return self.get(kind, name)

    def delete(self, kind: str, name: str) -> None:
        with self._write(f"delete {kind} '{name}'") as session:
            entry_id = session.scalar(
                select(Entry.id).where(Entry.kind == kind, Entry.name == name)
            )
            if entry_id is None:
                raise self._missing(kind, name)
            session.execute(delete(ValidationFigure).where(ValidationFigure.entry_id == entry_id))
            session.execute(delete(Entry).where(Entry.id == entry_id))

    # ---------------------------------------------------------------- reading
    def _find(
        self, kind: str, *, name: str | None = None, content_hash: str | None = None
    ) -> EntryInfo | None:
        query = select(*_INFO_COLUMNS).where(Entry.kind == kind)
        if name is not None:
            query = query.where(Entry.name == name)
        if content_hash is not None:
            query = query.where(Entry.content_hash == content_hash)
        rows = self._read(query)
        return _info(rows[0]) if rows else None

    def _missing(self, kind: str, name: str) -> NotFound:
        return NotFound(f"no {kind} named '{name}' is kept", field="name")

    def get(self, kind: str, name: str) -> EntryInfo:
        found = self._find(check_kind(kind), name=name)
        if found is None:
            raise self._missing(kind, name)
        return found

    def content(self, kind: str, name: str) -> bytes:
        rows = self._read(select(Entry.content).where(Entry.kind == kind, Entry.name == name))
        if not rows:
            raise self._missing(kind, name)
        return bytes(rows[0][0])

    def entries(
        self, kind: str | tuple[str, ...] | None = None, search: str = ""
    ) -> list[EntryInfo]:
        """Entries without their content, newest first: of one kind (or several), or all;
        `search` matches name, device, model, engine or notes, any case."""
        query = select(*_INFO_COLUMNS).order_by(Entry.created_at.desc(), Entry.id.desc())
        if isinstance(kind, str):
            query = query.where(Entry.kind == check_kind(kind))
        elif kind is not None:
            query = query.where(Entry.kind.in_([check_kind(k) for k in kind]))
        text = check_text(search, "search", 200).strip()
        if text:
            query = query.where(_matches(text))
        return [_info(row) for row in self._read(query)]

    def table(self, kind: tuple[str, ...], search: str = ""):
        """What a page lists, as a DataFrame, newest first: kind, name, device, model,
        engine, engine_version, created_by, created_at (UTC), notes. Built without a
        Python object per row, so 10,000 entries list in tens of milliseconds."""
        import pandas as pd

        columns = ["kind", "name", "device", "model", "engine", "engine_version"]
        columns += ["created_by", "created_at", "notes"]
        selected = [getattr(Entry, c) for c in columns]
        # The stored text of the time on SQLite (parsed below, all rows at once).
        selected[7] = type_coerce(Entry.created_at, String)
        query = (
            select(*selected)
            .where(Entry.kind.in_([check_kind(k) for k in kind]))
            .order_by(Entry.created_at.desc(), Entry.id.desc())
        )
        text = check_text(search, "search", 200).strip()
        if text:
            query = query.where(_matches(text))
        rows = self._read(query)
        values = list(zip(*rows, strict=True)) if rows else [()] * len(columns)
        frame = pd.DataFrame(dict(zip(columns, values, strict=True)))
        frame["created_at"] = pd.to_datetime(frame["created_at"], utc=True, format="ISO8601")
        return frame

    def table_version(self, kind: tuple[str, ...]) -> tuple:
        """A cheap signature of `table(kind)`'s rows: it changes with every save, rename,
        note and delete (count, id sum, newest id, newest save, newest edit)."""
        query = select(
            func.count(Entry.id),
            func.sum(Entry.id),
            func.max(Entry.id),
            type_coerce(func.max(Entry.created_at), String),
            type_coerce(func.max(Entry.updated_at), String),
        ).where(Entry.kind.in_([check_kind(k) for k in kind]))
        return tuple(str(v) for v in self._read(query)[0])

    def kinds_named(self, name: str) -> list[str]:
        """The kinds that have an entry of this name."""
        rows = self._read(select(Entry.kind).where(Entry.name == name).order_by(Entry.kind))
        return [r[0] for r in rows]

    def figures(self, metric: str | None = None) -> list[tuple[str, datetime, str, float]]:
        """Validation figures over time, oldest first: (run name, when, metric, value)."""
        query = (
            select(Entry.name, Entry.created_at, ValidationFigure.metric, ValidationFigure.value)
            .join(ValidationFigure, ValidationFigure.entry_id == Entry.id)
            .order_by(Entry.created_at, Entry.id, ValidationFigure.metric)
        )
        if metric is not None:
            query = query.where(ValidationFigure.metric == metric)
        out = []
        for name, when, m, value in self._read(query):
            when = when.replace(tzinfo=UTC) if when.tzinfo is None else when
            out.append((name, when, m, float(value)))
        return out
