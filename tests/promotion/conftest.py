"""Promotion fixtures: a catalog, the local provider, and validated images to promote.

``world`` gives a SQLite catalog file, a local registry and the repository's ``local``
stack (regions local-a/b/c). ``world.validated(...)`` imports a disk file into the
registry's ``build`` region (not a target, so every target region needs a real copy),
records it in the catalog with a receipt and moves it to ``validated``, as the build and
validation steps do. ``world.run_cli(...)`` runs ``imagectl`` in a subprocess with the
same catalog and registry (for kill points and concurrency).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from imagectl.validators.receipt import Receipt
from tests.support import make_receipt

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # the cloud fakes live in tests/fakes (``tests.fakes``)
    sys.path.insert(0, str(REPO))
SOURCE_REGION = "build"


@dataclass
class World:
    tmp: Path
    db_url: str
    registry: Path
    catalog: Any
    stack: Any  # ResolvedStack of images/stacks/local.yaml

    def provider(self, **options: Any) -> Any:
        from imagectl.clouds.local.provider import LocalProvider
        from imagectl.clouds.local.spec import LocalOptions

        return LocalProvider(LocalOptions(root=self.registry, **options))

    def disk(self, content: bytes | None = None) -> Path:
        path = self.tmp / f"disk-{uuid.uuid4().hex[:8]}.qcow2"
        path.write_bytes(content if content is not None else os.urandom(4096))
        return path

    def validated(
        self,
        *,
        region: str = SOURCE_REGION,
        receipt: Receipt | None = None,
        receipt_overrides: dict[str, Any] | None = None,
        verdict: str = "pass",
        age_hours: float = 1.0,
        state: str = "validated",
        digest: str | None = None,
        attest: bool = True,
    ) -> Any:
        """A validated image (catalog row) whose disk is in the registry's ``region``,
        with a signed attestation (the state folder's key) unless ``attest=False``."""
        from imagectl.catalog import repository as repo
        from imagectl.provenance.attest import attest_image

        digest = digest or self.stack.digest
        image = self.provider().import_image(
            self.disk(), region=region, stack="local", digest=digest
        )
        body = receipt or make_receipt(
            image.image_id, "local", digest, verdict=verdict, age_hours=age_hours
        )
        if receipt_overrides:
            body = Receipt.model_validate({**body.model_dump(mode="json"), **receipt_overrides})
        with self.catalog.transaction() as s:
            build = repo.record_build(
                s,
                build_id=f"b-{uuid.uuid4().hex[:8]}",
                stack="local",
                stack_digest=digest,
                cloud="local",
            )
            row = repo.record_image(s, build=build, cloud_image_id=image.image_id, region=region)
            repo.set_state(s, row, "validating", reason="test: validation started")
            repo.record_receipt(s, row, shape="qemu-tcg", host="vm-1", receipt=body)
            if state != "validating":
                target = "validated" if state in ("validated", "blocked") else state
                repo.set_state(s, row, target, reason="test: receipts recorded")
            if state == "blocked":
                repo.set_state(s, row, "blocked", reason="test", blocked_reason="bad NCCL")
        if state == "validated" and verdict == "pass" and attest:
            attest_image(self.catalog, row.id, self.provider())  # as the validation stage signs
        return row

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGECTL_")}
        env.update({k: os.environ[k] for k in ("IMAGECTL_ATTESTATION_TRUST",) if k in os.environ})
        env.update(
            IMAGECTL_DATABASE_URL=self.db_url,
            IMAGECTL_LOCAL_REGISTRY=str(self.registry),
            IMAGECTL_STATE_DIR=str(self.tmp / "state"),
            IMAGECTL_ROOT=str(REPO),
            IMAGECTL_ACTOR="tester",
            COLUMNS="200",
        )
        env.update(extra)
        return env

    def spawn(self, *args: str, **extra: str) -> subprocess.Popen[str]:
        code = "import sys; from imagectl.cli import main; sys.exit(main(sys.argv[1:]))"
        return subprocess.Popen(
            [sys.executable, "-c", code, *args],
            env=self.env(**extra),
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def run_cli(
        self, *args: str, timeout: float = 60, **extra: str
    ) -> subprocess.CompletedProcess[str]:
        proc = self.spawn(*args, **extra)
        out, err = proc.communicate(timeout=timeout)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def events(self, kind: str | None = None, image: Any = None) -> list[Any]:
        from imagectl.catalog import repository as repo

        with self.catalog.transaction() as s:
            return repo.events(s, kind=kind, image=image)

    def wait_for_event(self, kind: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not self.events(kind):
            assert time.monotonic() < deadline, f"no {kind} event after {timeout} s"
            time.sleep(0.05)

    def finish_copies_now(self) -> None:
        """The emulated cloud finishes every pending copy now (its ready time is on disk).

        Written the way the registry itself writes (a temporary file, then a rename): a
        running promotion polls these files, and an in-place write can be read half-made.
        """
        for path in self.registry.glob("*/copies/*.json"):
            record = json.loads(path.read_text())
            record["ready_at"] = 0
            tmp = path.with_name(path.name + ".test-tmp")
            tmp.write_text(json.dumps(record))
            os.replace(tmp, path)

    def image(self, pk: int) -> Any:
        from imagectl.catalog import repository as repo

        with self.catalog.transaction() as s:
            return repo.get_image(s, pk)

    def region_files(self, region: str) -> list[Path]:
        folder = self.registry / region / "images"
        return (
            sorted(p for p in folder.iterdir() if p.suffix == ".qcow2") if folder.is_dir() else []
        )


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from _world(tmp_path, f"sqlite:///{tmp_path / 'catalog.db'}")


@pytest.fixture
def world_pg(tmp_path: Path, postgres_url: str) -> Iterator[World]:
    """The same world with its catalog on a real PostgreSQL server (advisory locks)."""
    yield from _world(tmp_path, postgres_url)


def _world(tmp_path: Path, db_url: str) -> Iterator[World]:
    from imagectl.catalog.db import open_catalog
    from imagectl.stacks import load_resolved

    catalog = open_catalog(db_url)
    _loaded, resolved = load_resolved(REPO / "images", "local")
    registry = tmp_path / "registry"
    try:
        yield World(tmp_path, db_url, registry, catalog, resolved)
    finally:
        catalog.close()


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    from cloud_envs import FAKE_CREDS

    saved = {k: os.environ.get(k) for k in FAKE_CREDS}
    os.environ.update(FAKE_CREDS)
    from tests.fakes import moto_extensions
    from tests.fakes.fixtures import moto_serving

    moto_extensions.install()
    try:
        with moto_serving() as endpoint:
            yield endpoint
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _aws_env(resolved: Any, world: World, endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The moto server emptied (its state and the extensions' behaviour), and the AWS
    environment for the stack on it, exported."""
    import urllib.request

    import cloud_envs

    from tests.fakes import moto_extensions

    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"))
    moto_extensions.BEHAVIOUR.reset()
    env = cloud_envs.aws_env(resolved, world.catalog, endpoint)
    for key, value in env.env.items():
        monkeypatch.setenv(key, value)
    return env


@pytest.fixture(params=["aws", "gcp", "azure"])
def cloud(
    request: pytest.FixtureRequest, world: World, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    """The h100-training stack on one cloud's emulator (see ``cloud_envs.py``)."""
    import cloud_envs

    from imagectl.stacks import load_resolved

    _loaded, resolved = load_resolved(REPO / "images", cloud_envs.STACK)
    if request.param == "aws":
        yield _aws_env(resolved, world, request.getfixturevalue("moto_server"), monkeypatch)
    elif request.param == "gcp":
        from tests.fakes.gcp_compute import FakeGcpCompute

        with FakeGcpCompute(project="imagectl-test", op_polls=1) as gcp:
            yield cloud_envs.gcp_env(resolved, world.catalog, gcp)
    else:
        from tests.fakes.azure_arm import FakeAzureArm

        with FakeAzureArm(subscription="00000000-0000-0000-0000-000000000000") as arm:
            yield cloud_envs.azure_env(resolved, world.catalog, arm)


@pytest.fixture
def cloud_aws(world: World, moto_server: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The h100-training stack on moto only (for the subprocess kill-point tests)."""
    import cloud_envs

    from imagectl.stacks import load_resolved

    _loaded, resolved = load_resolved(REPO / "images", cloud_envs.STACK)
    return _aws_env(resolved, world, moto_server, monkeypatch)
