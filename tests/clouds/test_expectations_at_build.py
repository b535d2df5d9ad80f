"""Expectations once, at build: an image is judged by what its build
recorded, not by the stack as it reads after the build.

A real ``imagectl build --cloud aws --skip-provisioning`` (Debian's packer against a moto
EC2 server, as in tests/packer/test_aws_moto_build.py) records the image's expectations
per validation shape in the catalog. The stack file is then edited (the AWS kernel pin),
and ``imagectl validate-image`` (test-mode hosts replaying a healthy snapshot of the
image as built, with the old kernel) still judges the image by its build's record.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.clouds.scenario import HEALTHY, write_override
from tests.fakes.fixtures import register_base_ami
from tests.support import REPO, require_tool

pytest_plugins = ["tests.fakes.fixtures"]

STACK = "h100-training"
OWNER = "099720109477"  # the stack's base_image.owner (Canonical)


def _edit_kernel(root: Path, kernel: str) -> str:
    """Pin another AWS kernel in the workspace's stack file; the old pin."""
    path = root / "images" / "stacks" / f"{STACK}.yaml"
    yaml = YAML()
    yaml.preserve_quotes = True
    data = yaml.load(path.read_text())
    old = str(data["clouds"]["aws"]["kernel"])
    data["clouds"]["aws"]["kernel"] = kernel
    with path.open("w") as fh:
        yaml.dump(data, fh)
    return old


def _build_row(image_id: str) -> Any:
    from imagectl.catalog import repository as repo
    from imagectl.catalog.db import open_catalog

    with open_catalog().transaction() as s:
        (row,) = [r for r in repo.list_images(s, cloud="aws") if r.cloud_image_id == image_id]
        return row.build


def _set_record(build_id: str, **columns: Any) -> None:
    from imagectl.catalog import repository as repo
    from imagectl.catalog.db import open_catalog

    with open_catalog().transaction() as s:
        build = repo.find_build(s, build_id)
        assert build is not None
        for name, value in columns.items():
            setattr(build, name, value)


def _receipts(image_id: str) -> list[dict[str, Any]]:
    from imagectl.catalog import repository as repo
    from imagectl.catalog.db import open_catalog

    with open_catalog().transaction() as s:
        (row,) = [r for r in repo.list_images(s, cloud="aws") if r.cloud_image_id == image_id]
        return [dict(run.receipt) for run in repo.receipts(s, row)]


@pytest.fixture
def built(cli: Any, moto_server: str, workspace_copy: Path) -> tuple[Path, str, Any]:
    """(workspace, AMI id, its catalog build row) after a real build of the stack."""
    require_tool("packer")
    from imagectl.stacks import load_resolved

    # the build reads the validator's lock from the workspace (a stand-in SBOM lists it)
    (workspace_copy / "validators").symlink_to(REPO / "validators")

    _, resolved = load_resolved(workspace_copy / "images", STACK)
    aws = resolved.stack.clouds.aws
    register_base_ami(
        moto_server, aws.build.region, aws.base_image.name.replace("*", "20261101"), OWNER
    )
    result = cli(
        "--root", str(workspace_copy), "build", "--stack", STACK, "--cloud", "aws",
        "--skip-provisioning", "--json",
    )  # fmt: skip
    assert result.code == 0, result.out + result.err
    (image,) = result.json()["images"]
    return workspace_copy, image["image_id"], _build_row(image["image_id"])


def _validate(cli: Any, root: Path, image_id: str, tmp_path: Path, *extra: str) -> Any:
    return cli(
        "--root", str(root), "validate-image", image_id, "--cloud", "aws",
        "--inventory-override", str(write_override(tmp_path, [HEALTHY])),
        "--reach-timeout", "2", "--json", *extra,
    )  # fmt: skip


def test_an_image_is_judged_by_its_builds_record_after_the_stack_changed(
    cli: Any, built: tuple[Path, str, Any], tmp_path: Path
) -> None:
    root, image_id, build = built
    from imagectl.stacks import load_resolved
    from imagectl.stacks.expectations import BuildExpectations, for_shape

    # the build recorded the expectations of every validation shape of its cloud, with
    # the digest the image was built from
    record = BuildExpectations.from_columns(
        build.expectations_digest, build.expectations, where="test"
    )
    assert record is not None
    assert record.stack_digest == build.stack_digest
    assert list(record.shapes) == ["p5.48xlarge"]
    recorded = record.shapes["p5.48xlarge"]
    assert recorded.origin == f"build:{build.build_id}"

    old_kernel = _edit_kernel(root, "6.8.0-1040-aws")
    _, now = load_resolved(root / "images", STACK)
    assert now.digest != build.stack_digest  # the stack really changed...
    assert for_shape(root / "images", now, "p5.48xlarge").kernel == "6.8.0-1040-aws"
    assert recorded.kernel == old_kernel  # ...and with it what the stack would expect now

    result = _validate(cli, root, image_id, tmp_path)
    data = result.json()
    assert result.code == 0, result.out + result.err
    assert data["state"] == "validated", data["reasons"]
    assert data["expectations_from"] == f"build {build.build_id}"
    receipts = _receipts(image_id)
    assert receipts
    for receipt in receipts:  # the hosts got the build's record, not the edited stack
        assert receipt["stack_digest"] == build.stack_digest
        assert receipt["expectations"]["kernel"] == old_kernel
        assert {k: receipt["expectations"][k] for k in ("driver", "nccl", "packages")} == {
            "driver": recorded.driver,
            "nccl": recorded.nccl,
            "packages": recorded.packages,
        }


def test_an_image_without_a_record_takes_the_old_path(
    cli: Any, built: tuple[Path, str, Any], tmp_path: Path
) -> None:
    """An image built before builds recorded expectations (migration 0008): its
    expectations are resolved from the stack now, which is refused once the stack no
    longer resolves to the digest it was built from (it would be judged by other pins)."""
    root, image_id, build = built
    _set_record(build.build_id, expectations=None, expectations_digest=None)
    _edit_kernel(root, "6.8.0-1040-aws")
    result = _validate(cli, root, image_id, tmp_path)
    err = " ".join(result.err.split())
    assert result.code == 2, result.out + result.err
    assert f"built from stack digest {build.stack_digest[:12]}" in err
    assert "its build recorded no expectations" in err
    assert "Traceback" not in result.err

    # with the stack as it was, the old path validates it and says what judged it
    _edit_kernel(root, "6.8.0-1039-aws")
    data = _validate(cli, root, image_id, tmp_path).json()
    assert data["state"] == "validated", data["reasons"]
    assert (
        data["expectations_from"] == f"stack {STACK} as it resolves now (its build recorded none)"
    )


def test_a_record_that_cannot_judge_the_image_is_refused(
    cli: Any, built: tuple[Path, str, Any], tmp_path: Path
) -> None:
    """Another stack than the image's, a shape the build recorded nothing for, and a
    record whose digest is not the one the image was built from (the record's digest is
    compared with the image's): exit 2, one paragraph naming what to do, no host
    launched."""
    root, image_id, build = built
    result = _validate(cli, root, image_id, tmp_path, "--stack", "local")
    err = " ".join(result.err.split())
    assert result.code == 2, result.out + result.err
    assert f"image {image_id} was built from stack {STACK}, not local" in err

    result = _validate(cli, root, image_id, tmp_path, "--shape", "p4d.24xlarge")
    err = " ".join(result.err.split())
    assert result.code == 2, result.out + result.err
    assert "recorded expectations for p5.48xlarge only" in err
    assert "Pass --shape p5.48xlarge" in err

    _set_record(build.build_id, expectations_digest="f" * 64)
    result = _validate(cli, root, image_id, tmp_path)
    err = " ".join(result.err.split())
    assert result.code == 2, result.out + result.err
    assert "came from stack digest ffffffffffff" in err
    assert f"the image was built from {build.stack_digest[:12]}" in err
    assert "Traceback" not in result.err
    assert _receipts(image_id) == []


def test_a_toolkit_pin_changed_since_the_build_stops_before_any_launch(
    workspace_copy: Path,
) -> None:
    """The run ships the stack's toolkit (its lock), while the hosts judge the one the
    build recorded: a changed validation.toolkit is exit 2, naming both."""
    from imagectl.core.errors import UserError
    from imagectl.stacks import load_resolved
    from imagectl.stacks.expectations import for_build
    from imagectl.validation.stage import Judgement, _same_toolkit

    images = workspace_copy / "images"
    _, then = load_resolved(images, STACK)
    record = for_build(images, then, ["p5.48xlarge"], build_id="b-1")
    judged = Judgement(dict(record.shapes), record.stack_digest, "build b-1")
    _same_toolkit(judged, then)  # the same pin: fine

    path = images / "stacks" / f"{STACK}.yaml"
    path.write_text(path.read_text().replace('torch: "2.9.1"', 'torch: "2.8.0"'))
    _, now = load_resolved(images, STACK)
    assert now.validator_toolkit is not None and now.validator_toolkit["torch"] == "2.8.0"
    with pytest.raises(UserError) as err:
        _same_toolkit(judged, now)
    text = err.value.render()
    assert "validation.toolkit is now torch 2.8.0 (cu128)" in text
    assert "judged by torch 2.9.1 (cu128) (build b-1)" in text


def test_a_reused_candidates_older_build_gets_its_record() -> None:
    """The local cloud reuses a candidate of the same inputs (``build --reuse``, ``imagectl
    run``): its build, recorded before builds recorded expectations, gets them then (same
    inputs, same stack digest); a build of another digest is left alone."""
    from imagectl.building import records as build_records
    from imagectl.catalog import repository as repo
    from imagectl.clouds.registry import cloud_spec
    from imagectl.stacks import load_resolved
    from imagectl.stacks.expectations import BuildExpectations, for_build

    _, resolved = load_resolved(REPO / "images", "local")
    spec = cloud_spec("local")
    record = for_build(REPO / "images", resolved, ["qemu-tcg"], build_id="old")
    older = build_records.adopt(resolved, spec, "old", record).catalog
    with older.transaction() as s:  # as a build before migration 0008 left it
        build = repo.find_build(s, "old")
        assert build is not None
        build.expectations_digest, build.expectations = None, None
        repo.record_build(s, build_id="other", stack="local", stack_digest="0" * 64, cloud="local")

    for build_id in ("old", "other"):
        build_records.adopt(resolved, spec, build_id, record)
    with older.transaction() as s:
        old, other = repo.find_build(s, "old"), repo.find_build(s, "other")
        assert old is not None and other is not None
        got = BuildExpectations.from_columns(old.expectations_digest, old.expectations, where="t")
        assert got == record
        assert (other.expectations_digest, other.expectations) == (None, None)


# The driver version from the stack file to the gate: each hop is the function
# that puts it into a new carrier (an object, a file, a row); a function that hands the
# same object on is no hop. docs/architecture.md ("The driver version") has the trace.
DRIVER_HOPS = (
    ("stacks/loader.py", "load_stack"),  # the stack file -> Stack (parsed once per process)
    ("stacks/resolve.py", "ResolvedStack.pins"),  # -> Pins.driver
    ("stacks/expectations.py", "image_expectations"),  # -> Expectations.driver, per shape
    ("building/records.py", "start"),  # -> the catalog's builds.expectations
    ("building/records.py", "BuiltImage.of_row"),  # -> BuiltImage.expectations, read back
    ("validation/run.py", "ValidationRun.__init__"),  # -> the hosts' expect.json
    ("validators/session.py", "_make_receipt"),  # on the host: -> Receipt.expectations
    ("validation/receipts.py", "load_bound"),  # -> the receipt, read back and bound
    ("validation/records.py", "CatalogRecorder.receipt"),  # -> validation_runs.receipt
    ("promotion/gate.py", "_record_reasons"),  # the receipt's expectations == the record's
)


class _Calls:
    """Every call into imagectl's own code (this process, every thread): what each
    returned, and the arguments of the functions named in ``args`` (the hops' carriers are
    read from them)."""

    def __init__(self, args: set[tuple[str, str]]) -> None:
        import threading

        self.args = args
        self.seen: dict[tuple[str, str], list[Any]] = {}  # (file, qualname) -> returns
        self.entered: dict[tuple[str, str], list[dict[str, Any]]] = {}  # -> arguments
        self.expect_files: list[str] = []  # each ValidationRun's expect.json as written
        self._threading = threading

    @staticmethod
    def _key(frame: Any) -> tuple[str, str] | None:
        """(file under pipeline/, or validators/..., qualified name) of imagectl's code."""
        module = frame.f_globals.get("__name__") or ""
        if not module.startswith("imagectl."):
            return None
        rel = module.removeprefix("imagectl.").replace(".", "/") + ".py"
        code = frame.f_code
        if hasattr(code, "co_qualname"):
            return rel, code.co_qualname
        owner = frame.f_locals.get("self", frame.f_locals.get("cls"))  # Python 3.10
        owner = owner if isinstance(owner, type) or owner is None else type(owner)
        return rel, f"{owner.__name__}.{code.co_name}" if owner else code.co_name

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event not in ("call", "return"):
            return
        key = self._key(frame)
        if key is None:
            return
        if event == "call":
            if key in self.args:
                self.entered.setdefault(key, []).append(dict(frame.f_locals))
            return
        self.seen.setdefault(key, []).append(arg)
        if key == ("validation/run.py", "ValidationRun.__init__"):
            self.expect_files.append(frame.f_locals["self"]._expect_file.read_text())

    def __enter__(self) -> _Calls:
        sys.setprofile(self)
        self._threading.setprofile(self)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)
        self._threading.setprofile(None)  # type: ignore[arg-type]

    def returns(self, file: str, name: str) -> list[Any]:
        return self.seen.get((file, name), [])


def test_the_driver_version_reaches_the_gate_in_ten_hops_and_the_stack_is_parsed_once(
    cli: Any, moto_server: str, workspace_copy: Path, tmp_path: Path
) -> None:
    """plan, build --dry-run, build, validate-image (replayed hosts) and promote --dry-run
    in one process: the stack file is parsed once, and the driver version goes from it to
    the gate through exactly DRIVER_HOPS (at most 10), each hop's carrier holding it and
    the functions between hops handing on the same object."""
    require_tool("packer")
    import json

    from imagectl.stacks import load_resolved
    from imagectl.stacks.loader import parse_count

    assert len(DRIVER_HOPS) <= 10
    root = workspace_copy
    (root / "validators").symlink_to(REPO / "validators")
    parsed_before = parse_count()
    _, resolved = load_resolved(root / "images", STACK)
    driver = resolved.pins().driver
    assert driver
    aws = resolved.stack.clouds.aws
    assert aws is not None
    register_base_ami(
        moto_server, aws.build.region, aws.base_image.name.replace("*", "20261101"), OWNER
    )

    watched = {("validation/run.py", "ValidationRun.__init__"),
               ("validation/records.py", "CatalogRecorder.receipt")}  # fmt: skip
    with _Calls(watched) as calls:
        ws = ("--root", str(root))
        plan = cli(*ws, "plan", "--stack", STACK, "--cloud", "aws", "--offline",
                   "--out", str(tmp_path / "plan"))  # fmt: skip
        assert plan.code == 0, plan.out + plan.err
        dry = cli(*ws, "build", "--stack", STACK, "--cloud", "aws", "--dry-run", "--json")
        assert dry.code == 0, dry.out + dry.err
        built = cli(*ws, "build", "--stack", STACK, "--cloud", "aws", "--skip-provisioning",
                    "--json")  # fmt: skip
        assert built.code == 0, built.out + built.err
        (image,) = built.json()["images"]
        image_id = image["image_id"]
        validated = _validate(cli, root, image_id, tmp_path)
        assert validated.code == 0, validated.out + validated.err
        assert validated.json()["state"] == "validated"
        gate = cli(*ws, "promote", image_id, "--cloud", "aws", "--dry-run", "--json")
        assert gate.code in (0, 1), gate.out + gate.err  # 1: unsigned (no signer here)

    # the stack file was parsed once in this process, whatever loaded it
    assert parse_count() - parsed_before == 1

    # each hop ran and its carrier holds the driver version
    for file, name in DRIVER_HOPS:
        if not file.startswith("validators/"):  # the host's hop runs in its own process
            assert calls.returns(file, name), f"{file}:{name} was not on the path"
    loaded = calls.returns("stacks/loader.py", "load_stack")
    assert {x.stack.nvidia.driver.version for x in loaded} == {driver}
    assert {p.driver for p in calls.returns("stacks/resolve.py", "ResolvedStack.pins")} == {driver}
    made = calls.returns("stacks/expectations.py", "image_expectations")
    assert made and {e.driver for e in made} == {driver}
    (record,) = calls.returns("building/records.py", "start")
    assert {e["driver"] for e in record.build.expectations.values()} == {driver}
    read_back = [b for b in calls.returns("building/records.py", "BuiltImage.of_row")]
    assert read_back and all(
        {e.driver for e in b.expectations.shapes.values()} == {driver} for b in read_back
    )
    (runner,) = calls.entered[("validation/run.py", "ValidationRun.__init__")]
    (shipped,) = calls.expect_files
    assert json.loads(shipped)["driver"] == driver
    receipts = _receipts(image_id)
    assert receipts and {r["expectations"]["driver"] for r in receipts} == {driver}
    assert all(any(c["id"] == "sw.driver.version" for c in r["checks"]) for r in receipts)
    bound = [o.receipt for o in calls.returns("validation/receipts.py", "load_bound")]
    assert bound and {r.expectations["driver"] for r in bound if r} == {driver}
    recorded = calls.entered[("validation/records.py", "CatalogRecorder.receipt")]
    assert {c["outcome"].receipt.expectations["driver"] for c in recorded} == {driver}
    assert calls.returns("promotion/gate.py", "_record_reasons") == [[]]

    # between the hops the same object is handed on: the build records the very objects
    # image_expectations made, and the hosts get the very object the record was read into
    (recorded_set,) = calls.returns("stacks/expectations.py", "for_build")
    assert all(any(e is m for m in made) for e in recorded_set.shapes.values())
    shipped_expect = runner["request"].expect
    assert any(shipped_expect is e for b in read_back for e in b.expectations.shapes.values())
