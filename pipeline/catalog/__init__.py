"""The image catalog: what was built, validated and promoted, where, and by whom.

One file per concern:

- ``models.py``: the tables (builds, images per cloud and region, validation runs,
  promotions, "latest" pointers, the append-only event log, locks).
- ``lifecycle.py``: image states and the allowed transitions (one table, pure Python).
- ``db.py``: the database URL (``$IMAGECTL_DATABASE_URL`` or SQLite in the state dir),
  engines, automatic Alembic migrations, ``open_catalog()`` and ``Catalog.transaction()``.
- ``repository.py``: the API the rest of imagectl calls (record_build, record_image,
  set_state, record_receipt, start/finish_promotion, set/get_pointer, list_images,
  events, log_event).
- ``locks.py``: ``promotion_lock()``: one promotion per stack and cloud at a time.
- ``migrations/``: the Alembic environment and revisions (shipped in the wheel).

Importing this package loads nothing; the modules above import SQLAlchemy (except
``lifecycle``), so CLI modules import them inside their command functions.
"""
