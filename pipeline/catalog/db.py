"""Opening the catalog database: URL, engine, automatic migrations, sessions.

The URL is ``$IMAGECTL_DATABASE_URL`` when set (for example
``postgresql+psycopg://user@host/imagectl``, which needs ``pip install 'imagectl[postgres]'``),
else a SQLite file ``catalog.db`` in ``imagectl.paths.state_dir()``: nothing to set up.

``open_catalog()`` creates the engine, brings the schema to the newest Alembic revision the
first time (serialised between processes: the write lock of ``BEGIN IMMEDIATE`` on
SQLite, an advisory lock on PostgreSQL) and returns a ``Catalog``. Use
``catalog.transaction()`` for a session that commits on success and rolls back on error.
Any failure to reach or read the database becomes a ``CatalogUnavailable`` (a UserError:
one paragraph, exit 2), never a traceback.

SQLite connections run with foreign keys on, WAL journal, a busy timeout, and every
transaction opened with ``BEGIN IMMEDIATE`` (writers queue instead of failing with
"database is locked" halfway through a transaction).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, create_engine, event, exc, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import Session, sessionmaker

import imagectl.catalog.migrations as migrations
from imagectl.core.errors import MissingDependency, UserError
from imagectl.paths import state_dir
from imagectl.redact import redact_url, scrub

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from sqlalchemy.engine import Connection

ENV_DATABASE_URL = "IMAGECTL_DATABASE_URL"
SQLITE_FILE = "catalog.db"
BUSY_TIMEOUT_S = 30.0
MIGRATION_LOCK_KEY = 0x696D6167  # "imag": PostgreSQL advisory lock held while migrating


class CatalogUnavailable(UserError):
    """The catalog database cannot be reached, opened or read (exit 2)."""


def database_url() -> str:
    """The configured catalog URL (see the module docstring)."""
    configured = os.environ.get(ENV_DATABASE_URL, "").strip()
    if configured:
        return configured
    return f"sqlite:///{state_dir() / SQLITE_FILE}"


def _raw(url: str | URL) -> str:
    return url.render_as_string(hide_password=False) if isinstance(url, URL) else str(url)


def display_url(url: str | URL) -> str:
    """The URL for messages: its password, a lone user name and secret query parameters
    (libpq's ``?password=``, ``?sslpassword=``, ``?sslkey=``...) hidden
    (``imagectl.redact``)."""
    return redact_url(_raw(url))


def mask_url(raw: str) -> str:
    """``display_url`` of a URL that may not parse."""
    return redact_url(raw)


def _unavailable(url: str | URL, error: BaseException) -> CatalogUnavailable:
    detail = str(getattr(error, "orig", None) or error).strip().splitlines()
    first = scrub(detail[0], _raw(url)) if detail else type(error).__name__
    if str(url).startswith("sqlite"):
        check = "that the file is an imagectl catalog (SQLite) and readable and writable"
    else:
        check = "that the server is running and reachable and the user may log in"
    return CatalogUnavailable(
        f"cannot open the image catalog at {display_url(url)}: {first}",
        hint=(
            f"Check ${ENV_DATABASE_URL} (unset it to use the local SQLite file in the state "
            f"directory) and {check}"
        ),
    )


def _sqlite_setup(engine: Engine) -> None:
    """Pragmas on connect; take over BEGIN so every transaction is BEGIN IMMEDIATE."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, record: Any) -> None:
        dbapi_conn.isolation_level = None  # pysqlite must not issue its own BEGIN
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        cur.execute("PRAGMA foreign_keys = ON")
        if engine.url.database not in (None, "", ":memory:"):
            cur.execute("PRAGMA journal_mode = WAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def _create_private(path: Path) -> None:
    """A new SQLite catalog file is created 0600 (SQLite gives its -wal and -shm files
    the database file's permissions)."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        pass
    except OSError:
        pass  # reported by the first connection with the URL and what to check


def make_engine(url: str) -> Engine:
    """An Engine for ``url``, with a clear error for malformed URLs and missing drivers."""
    try:
        parsed = make_url(url)
    except (exc.ArgumentError, ValueError) as error:
        why = (
            "the port is not a number"
            if isinstance(error, ValueError)
            else "expected dialect+driver://user:password@host:port/database"
        )
        raise CatalogUnavailable(
            f"the catalog URL '{mask_url(url)}' is not a database URL ({why})",
            hint=(
                f"Set ${ENV_DATABASE_URL} to a URL such as "
                "postgresql+psycopg://user@host/imagectl or sqlite:////path/catalog.db"
            ),
        ) from None
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise CatalogUnavailable(
            f"the catalog URL {display_url(parsed)} uses '{backend}', which imagectl does not "
            "support",
            hint=f"Set ${ENV_DATABASE_URL} to sqlite:///... or postgresql+psycopg://...",
        )
    kwargs: dict[str, object] = {}
    if backend == "sqlite":
        db = parsed.database
        if db and db != ":memory:":
            folder = Path(db).expanduser().parent
            if not folder.is_dir():
                raise CatalogUnavailable(
                    f"cannot open the image catalog at {display_url(parsed)}: the folder "
                    f"{folder} does not exist",
                    hint=f"Create it, or fix ${ENV_DATABASE_URL}",
                )
            _create_private(Path(db).expanduser())
        kwargs["connect_args"] = {"timeout": BUSY_TIMEOUT_S}
    else:
        kwargs["pool_pre_ping"] = True
        kwargs["connect_args"] = {"connect_timeout": 10}
    try:
        engine = create_engine(parsed, **kwargs)
    except ModuleNotFoundError as error:
        raise MissingDependency(error.name or "psycopg", "postgres") from None
    except exc.NoSuchModuleError as error:
        raise _unavailable(url, error) from None
    if backend == "sqlite":
        _sqlite_setup(engine)
    return engine


@dataclass
class Catalog:
    """An open catalog: the engine and a session factory bound to it."""

    engine: Engine
    sessions: sessionmaker[Session]

    @property
    def url(self) -> str:
        return display_url(self.engine.url)

    @property
    def backend(self) -> str:
        return self.engine.url.get_backend_name()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Session]:
        """A session in one transaction: commit on success, roll back on any error."""
        try:
            with self.sessions.begin() as session:
                yield session
        except (exc.OperationalError, exc.InterfaceError) as error:
            raise _unavailable(self.engine.url, error) from error

    def close(self) -> None:
        self.engine.dispose()


def _alembic_config(connection: Connection | None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).parent))
    config.attributes["connection"] = connection
    return config


def _scripts() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_alembic_config(None))


def head_revision() -> str:
    """The newest schema revision this imagectl knows."""
    head = _scripts().get_current_head()
    assert head is not None
    return str(head)


@functools.cache
def known_head() -> str | None:
    """The newest revision of the migration scripts, read from their ``revision`` and
    ``down_revision`` assignments without Alembic (importing it and loading its script
    directory cost ~0.4 s of CPU in every process that opened the catalog, which is
    already at head but for the first use after an upgrade). None when the scripts do not
    read as one straight line of revisions: the caller then asks Alembic."""
    revisions: dict[str, str | None] = {}
    for path in sorted((Path(migrations.__file__).parent / "versions").glob("*.py")):
        if path.name == "__init__.py":
            continue
        values: dict[str, object] = {}
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            target = node.targets[0] if isinstance(node, ast.Assign) else None
            if isinstance(node, ast.AnnAssign):
                target = node.target
            value = getattr(node, "value", None)
            if isinstance(target, ast.Name) and isinstance(value, ast.Constant):
                values[target.id] = value.value
        rev, down = values.get("revision"), values.get("down_revision", "?")
        if not isinstance(rev, str) or not (down is None or isinstance(down, str)):
            return None
        revisions[rev] = down
    heads = set(revisions) - set(revisions.values())
    return next(iter(heads)) if len(heads) == 1 else None


def _stored_revisions(engine: Engine) -> list[str] | None:
    """The revisions in the database's ``alembic_version`` table; None when it has none."""
    with engine.connect() as conn:
        try:
            rows = conn.execute(text("SELECT version_num FROM alembic_version")).all()
        except exc.DBAPIError:  # no table yet: a new catalog
            return None
    return [str(r[0]) for r in rows]


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


@contextlib.contextmanager
def _migration_lock(engine: Engine) -> Iterator[None]:
    """Serialise first-time migrations between processes (PostgreSQL: advisory lock)."""
    if engine.url.get_backend_name() == "postgresql":
        with engine.connect() as conn:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": MIGRATION_LOCK_KEY})
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": MIGRATION_LOCK_KEY})
        return
    # SQLite: nothing to add. migrate() runs inside BEGIN IMMEDIATE, which holds the
    # database's write lock before Alembic reads the current revision.
    yield


def migrate(engine: Engine, revision: str = "head") -> None:
    """Upgrade the schema to ``revision`` (Alembic ``upgrade``, run in code)."""
    from alembic import command

    with _migration_lock(engine), engine.begin() as conn:
        command.upgrade(_alembic_config(conn), revision)


def ensure_schema(engine: Engine) -> None:
    """Migrate to head if the database is behind; refuse a database from a newer imagectl.

    A catalog already at head (one ``alembic_version`` row naming ``known_head()``) is
    opened without Alembic; anything else goes through it."""
    head = known_head()
    if head is not None and _stored_revisions(engine) == [head]:
        return
    scripts = _scripts()
    head = scripts.get_current_head()
    current = current_revision(engine)
    if current == head:
        return
    if current is not None and current not in {rev.revision for rev in scripts.walk_revisions()}:
        raise CatalogUnavailable(
            f"the image catalog at {display_url(engine.url)} has schema revision '{current}', "
            f"which this imagectl does not know (newest known: '{head}')",
            hint="Upgrade imagectl, or point $IMAGECTL_DATABASE_URL at another catalog",
        )
    migrate(engine)


def open_catalog(url: str | None = None, *, migrate_schema: bool = True) -> Catalog:
    """Open (and on first use create and migrate) the catalog at ``url`` or the default."""
    url = url or database_url()
    engine = make_engine(url)
    try:
        if migrate_schema:
            ensure_schema(engine)
        else:
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
    except CatalogUnavailable:
        engine.dispose()
        raise
    except (exc.OperationalError, exc.InterfaceError, exc.DatabaseError) as error:
        engine.dispose()
        raise _unavailable(url, error) from None
    return Catalog(engine=engine, sessions=sessionmaker(engine, expire_on_commit=False))
