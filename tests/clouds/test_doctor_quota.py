"""The doctor's quota check is written once (``imagectl.doctor.quota``) and each cloud
supplies only its quota API, registered through its spec (``CloudSpec.doctor_module``:
``clouds/<cloud>/doctor.py``): the call that reads its quotas
where the stack validates, the permission that call needs, and what a shape counts against
in the answer. The read made once, the warning when it cannot be read and the loop over the
shapes are the shared module's.

The loop's outcomes are driven first through the shipped quotas.yaml entries with a quota
API answering from a table; then every registered cloud's own quota API, through its SDK,
against its emulator holding the caller to the shipped build document
(tests/fakes/permissions.py): readable, one read gives each shape its finding; refused,
one warning naming the call, the permission and what to do, and nothing more asked."""

from __future__ import annotations

import ast
import contextlib
import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from imagectl.clouds.account import cloud_checks
from imagectl.clouds.registry import specs
from imagectl.doctor.findings import BLOCKER, OK, WARNING, Finding
from imagectl.doctor.quota import NETWORK, Quota, QuotaApi, quota_findings
from imagectl.stacks import load_resolved
from tests.fakes import moto_doctor
from tests.fakes import permissions as perm
from tests.fakes.azure_arm import FakeAzureArm
from tests.fakes.doctor_apis import ArmDoctorApis, GcpDoctorApis
from tests.fakes.gcp_compute import FakeGcpCompute

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "images"
STACK = "h100-training"
# the clouds with account checks: each gives its quota API
ACCOUNTS = [name for name, spec in specs().items() if spec.doctor_module]


def test_every_remote_cloud_registers_its_doctor_from_its_folder() -> None:
    for name, spec in specs().items():
        checks = cloud_checks(name)
        if not spec.remote:
            assert checks is None and spec.doctor_module == ""
            continue
        assert spec.doctor_module == f"imagectl.clouds.{name}.doctor"
        assert checks is importlib.import_module(spec.doctor_module)
        assert callable(checks.diagnose) and isinstance(checks.ENDPOINT_ENV, tuple)
        assert callable(checks.connect) and callable(checks.quota_api)
    assert not list((ROOT / "pipeline" / "doctor").glob("aws.py"))
    assert {p.stem for p in (ROOT / "pipeline" / "doctor").glob("*.py")} == {
        "__init__", "findings", "needs", "offline", "quota", "run",
    }  # fmt: skip


def test_no_cloud_loops_over_its_shapes_quotas_itself() -> None:
    """A cloud's doctor says how to read its quotas; the loop over the validation shapes,
    the missing quotas.yaml entry, the comparison and the warning for an unread quota are
    the ones in imagectl.doctor.quota: no cloud makes a "quota" finding itself."""
    for name, spec in specs().items():
        if not spec.doctor_module:
            continue
        path = ROOT / "pipeline" / "clouds" / name / "doctor.py"
        tree = ast.parse(path.read_text())
        imported = {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "imagectl.doctor.needs"
            for alias in node.names
        }
        assert "quota" not in imported, path
        assert "no quota known" not in path.read_text(), path
        assert "quota_findings" in path.read_text(), path
        quota_findings_made = [
            node.lineno
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and getattr(node.func, "id", "") == "Finding"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == "quota"
        ]
        assert quota_findings_made == [], (path, quota_findings_made)


# -- the loop, with a quota API answering from a table ----------------------------------------
class Denied(Exception):
    """A refusal, as a cloud's SDK raises it."""


@dataclass
class TableApi:
    """A quota API whose one call answers ``table`` (key -> name -> (limit or value, use))
    and raises ``fails`` when set; every call is counted."""

    table: dict[str, dict[str, tuple[float, float | None]]]
    fails: Exception | None = None
    keyed: bool = False  # one call a quota code, as AWS reads (else one call for the region)
    asked: int = 0

    def read(self, key: str) -> dict[str, tuple[float, float | None]]:
        self.asked += 1
        if self.fails is not None:
            raise self.fails
        return self.table[key]

    def quota(self, where: str, answer: Any, entry: Mapping[str, Any], hosts: int) -> Quota:
        name = str(entry.get("quota_code") or entry.get("metric"))
        value, use = answer[name]
        wanted = int(entry.get("gpus") or entry.get("vcpus") or 0) * hosts
        if use is None:
            return Quota(f"{name} in {where}", wanted, value, "raise it", unit=" vCPUs")
        return Quota(f"{name} in {where}", wanted, value - use, "ask for more", limit=value)

    def api(self, where: str) -> QuotaApi:
        return QuotaApi(
            where=where,
            call="Quotas - Get",
            permission="quotas.get",
            read=self.read,
            quota=self.quota,
            refused=lambda exc: isinstance(exc, Denied),
            key=(lambda entry: str(entry["quota_code"])) if self.keyed else None,
        )


def test_short_enough_and_unknown_quotas_from_one_read() -> None:
    table = TableApi({"us-central1": {"NVIDIA_H100_GPUS": (8.0, 0.0),
                                      "NVIDIA_A100_80GB_GPUS": (32.0, 8.0)}})  # fmt: skip
    found = quota_findings(
        IMAGES, ["a3-highgpu-8g", "a2-ultragpu-8g", "no-such-shape"], 2, table.api("us-central1")
    )
    assert [(f.status, f.message) for f in found] == [
        (BLOCKER, "NVIDIA_H100_GPUS in us-central1: 8 free of 8; 2 x a3-highgpu-8g needs 16"),
        (OK, "NVIDIA_A100_80GB_GPUS in us-central1: 24 free >= 16"),
        (WARNING, "no quota known for no-such-shape"),
    ]
    assert found[0].fix == "ask for more" and found[2].fix.endswith("quotas.yaml")
    assert table.asked == 1


def test_a_keyed_quota_is_read_once_a_key_and_says_its_value() -> None:
    table = TableApi({"L-417A185B": {"L-417A185B": (96.0, None)},
                      "L-DB2E81BA": {"L-DB2E81BA": (48.0, None)}}, keyed=True)  # fmt: skip
    shapes = ["p5.48xlarge", "p4d.24xlarge", "g5.12xlarge", "p4de.24xlarge"]
    found = quota_findings(IMAGES, shapes, 1, table.api("us-east-1"))
    assert [(f.status, f.message) for f in found] == [
        (BLOCKER, "L-417A185B in us-east-1 is 96 vCPUs; 1 x p5.48xlarge needs 192"),
        (OK, "L-417A185B in us-east-1: 96 vCPUs >= 96"),
        (OK, "L-DB2E81BA in us-east-1: 48 vCPUs >= 48"),
        (OK, "L-417A185B in us-east-1: 96 vCPUs >= 96"),
    ]
    assert found[0].fix == "raise it"
    assert table.asked == 2  # one call a quota code


@pytest.mark.parametrize("keyed", [False, True])
def test_a_quota_the_cloud_refuses_is_one_warning_and_nothing_more_is_asked(keyed: bool) -> None:
    table = TableApi({}, fails=Denied("Required 'quotas.get' permission"), keyed=keyed)
    shapes = ["p5.48xlarge", "g5.12xlarge", "no-such-shape", "p4d.24xlarge"]
    found = quota_findings(IMAGES, shapes, 1, table.api("us-east-1"))
    what = "quota L-417A185B" if keyed else "quotas"
    assert found == [
        Finding("quota", WARNING,
                f"cannot read {what} in us-east-1 (Quotas - Get): "
                "Required 'quotas.get' permission", "grant quotas.get"),
        Finding("quota", WARNING, "no quota known for no-such-shape",
                "add it to images/catalog/quotas.yaml"),
    ]  # fmt: skip
    assert table.asked == 1


def test_a_quota_read_that_fails_otherwise_says_to_check_the_endpoint() -> None:
    table = TableApi({}, fails=ConnectionError("Connection refused\nat 127.0.0.1:1"))
    found = quota_findings(IMAGES, ["a3-highgpu-8g", "a2-ultragpu-8g"], 1, table.api("us-east5"))
    assert found == [
        Finding("quota", WARNING,
                "cannot read quotas in us-east5 (Quotas - Get): Connection refused", NETWORK),
    ]  # fmt: skip
    assert table.asked == 1


# -- each registered cloud's quota API, through its SDK, against its emulator ----------------
@dataclass
class Emulated:
    """A cloud's emulator answering its quota call."""

    fake: Any  # the HTTP fake ``perm.enforced`` holds to a document; None: moto in process
    # two validation shapes that one read answers: the first short of quota, the second not
    shapes: tuple[str, str]
    reads: Callable[[Any], Callable[[], int]]  # (the cloud's clients) -> calls of the quota call


@contextlib.contextmanager
def _aws(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Emulated]:
    def reads(clients: Any) -> Callable[[], int]:
        calls: list[str] = []
        clients.session.events.register(
            "before-call.service-quotas.GetServiceQuota", lambda **kw: calls.append("get")
        )
        return lambda: len(calls)

    with moto_doctor.account(monkeypatch):
        moto_doctor.EC2_QUOTAS["L-417A185B"] = 96.0  # p5.48xlarge needs 192, p4d.24xlarge 96
        yield Emulated(None, ("p5.48xlarge", "p4d.24xlarge"), reads)


@contextlib.contextmanager
def _gcp(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Emulated]:
    with FakeGcpCompute(project=settings.build.project) as fake:
        monkeypatch.setenv("IMAGECTL_GCP_ENDPOINT", fake.endpoint)
        apis = GcpDoctorApis(fake, region=settings.build.zone.rsplit("-", 1)[0])
        apis.quotas["NVIDIA_H100_GPUS"] = (8.0, 8.0)
        apis.quotas["NVIDIA_A100_80GB_GPUS"] = (16.0, 0.0)
        regions = r"/regions/[^/]+$"
        yield Emulated(fake, ("a3-highgpu-8g", "a2-ultragpu-8g"),
                       lambda clients: lambda: len(fake.calls("GET", regions)))  # fmt: skip


@contextlib.contextmanager
def _azure(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Emulated]:
    with FakeAzureArm(subscription=settings.build.subscription_id) as fake:
        monkeypatch.setenv("IMAGECTL_AZURE_ENDPOINT", fake.endpoint)
        apis = ArmDoctorApis(fake, groups=set())
        apis.usages["standardNDSH100v5Family"] = (96, 96)
        apis.usages["standardNDASv4_A100Family"] = (192, 0)
        yield Emulated(fake, ("Standard_ND96isr_H100_v5", "Standard_ND96asr_v4"),
                       lambda clients: lambda: len(fake.calls("GET", r"/usages$")))  # fmt: skip


# every remote cloud's emulator: a cloud registered without one fails here until it has one
EMULATORS = {"aws": _aws, "gcp": _gcp, "azure": _azure}


@pytest.fixture(params=ACCOUNTS)
def cloud(request: pytest.FixtureRequest) -> str:
    assert request.param in EMULATORS, f"add {request.param}'s emulator to EMULATORS"
    return str(request.param)


def _read(cloud: str, monkeypatch: pytest.MonkeyPatch, without: bool) -> tuple[Any, ...]:
    """(findings, the quota API, the enforcer, calls of the quota call): the stack's
    quota read through the cloud's SDK by the holder of the shipped build document, or of
    that document ``without`` the quota call's permission."""
    checks = cloud_checks(cloud)
    assert checks is not None
    _, resolved = load_resolved(IMAGES, STACK)
    settings = resolved.stack.clouds.section(cloud)
    with EMULATORS[cloud](settings, monkeypatch) as emulated:
        clients = checks.connect(settings)
        reads = emulated.reads(clients)
        api = checks.quota_api(clients, settings)
        doc = perm.load_document(cloud, "build")
        assert api.permission in perm.granted(cloud, doc)  # the build document grants it
        if without:
            doc = perm.without(cloud, doc, api.permission)
        with perm.enforced(cloud, emulated.fake, monkeypatch, doc) as enforcer:
            found = quota_findings(IMAGES, list(emulated.shapes), 1, api)
        return found, api, enforcer, reads(), emulated.shapes


def test_a_readable_quota_gives_each_shape_its_finding_from_one_read(
    cloud: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    found, api, enforcer, reads, shapes = _read(cloud, monkeypatch, without=False)
    assert [(f.check, f.status) for f in found] == [("quota", BLOCKER), ("quota", OK)], found
    assert f"1 x {shapes[0]} needs" in found[0].message and "increase" in found[0].fix
    assert all(api.where in f.message for f in found)
    assert reads == 1 and enforcer.refused == []


def test_a_refused_quota_read_is_one_warning_naming_the_permission(
    cloud: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    found, api, enforcer, reads, _ = _read(cloud, monkeypatch, without=True)
    (warning,) = found
    assert warning.check == "quota" and warning.status == WARNING
    assert warning.message.startswith("cannot read quota")
    assert f" in {api.where} ({api.call}): " in warning.message
    assert api.permission in warning.message  # the cloud's own refusal names it
    assert warning.fix == f"grant {api.permission}"
    assert enforcer.refused == [api.permission] and reads == 1
