"""The GPU toolkit travels with the validation, not in the image: ``validate-image`` on each
cloud's protocol fake makes the stack's toolkit wheelhouse on the controller and the hosts
install it for the run only.

Test mode (tests/clouds/scenario.py): every host is this machine through Ansible's local
connection, running the real playbooks/validate.yml and the real validator. The toolkit
is a stand-in laid out like torch+cu128 (tests/support.py ``fake_torch_wheel``) served by a
PEP 503 index on disk, locked by the real lock code (``imagectl.supply.lock``) for the
stack's Python (h100-training: Ubuntu 22.04, 3.10) and named by the override's
``toolkit`` key, as a lab's mirror would be.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from imagectl.core.errors import UserError
from imagectl.paths import find_workspace
from imagectl.stacks import load_resolved
from imagectl.supply.lock import LockSpec, toolkit_requirement, write_lock
from imagectl.supply.targets import PLATFORMS
from imagectl.validation.inventory import InventoryOverride
from imagectl.validation.toolkit import run_wheelhouse, ships_to
from tests.clouds.scenario import HEALTHY, write_override
from tests.fakes.fixtures import CloudEnv
from tests.support import fake_torch_wheel, simple_index

STACK = "h100-training"


def _stand_in(folder: Path) -> tuple[Path, str]:
    """(lock, index URL): the stand-in toolkit locked as the lock command locks torch."""
    url = simple_index(folder / "index", [fake_torch_wheel(folder / "wheels")])
    spec = LockSpec(
        path=folder / "torch-2.9.1-cu128.lock", title="stand-in torch 2.9.1 (cu128)",
        command="test", requirements=(toolkit_requirement("2.9.1", "cu128"),), index_url=url,
        pythons=("3.10",), platforms=PLATFORMS,
    )  # fmt: skip
    return write_lock(spec), url


def _with_toolkit(override: Path, lock: Path, url: str, **all_vars: str) -> Path:
    yaml = YAML()
    data = yaml.load(override.read_text())
    data["toolkit"] = {"lock": str(lock), "index_url": url}
    data["all"].update(all_vars)
    with override.open("w") as fh:
        yaml.dump(data, fh)
    return override


def _validate(cli: Any, env: CloudEnv, image_id: str, override: Path) -> Any:
    return cli(
        "validate-image", image_id, "--cloud", env.cloud, "--stack", STACK,
        "--inventory-override", str(override), "--reach-timeout", "2", "--json",
    )  # fmt: skip


def _receipts(cloud: str, image_id: str) -> list[dict[str, Any]]:
    from imagectl.catalog import repository as repo
    from imagectl.catalog.db import open_catalog

    with open_catalog().transaction() as s:
        rows = [r for r in repo.list_images(s, cloud=cloud) if r.cloud_image_id == image_id]
        return [dict(run.receipt or {}) for run in repo.receipts(s, rows[0])]


def test_the_host_installs_the_pinned_toolkit_for_the_run_and_removes_it(
    cli: Any, cloud_env: CloudEnv, tmp_path: Path
) -> None:
    lock, url = _stand_in(tmp_path / "toolkit")
    host_dir = tmp_path / "host-work"  # the host's work folder, kept to look into after
    override = _with_toolkit(
        write_override(tmp_path, [HEALTHY], cloud=cloud_env.cloud), lock, url,
        validate_remote_dir=str(host_dir),
    )  # fmt: skip
    image = cloud_env.seed_candidate()
    result = _validate(cli, cloud_env, image.image_id, override)
    data = result.json()
    assert result.code == 0, (result.out, result.err)
    assert data["state"] == "validated"
    assert cloud_env.live_instances() == []
    shipped = Path(data["toolkit_wheelhouse"])  # the controller's, checked against the lock
    (receipt,) = _receipts(cloud_env.cloud, image.image_id)
    installed = receipt["host"]["toolkit_venv"]
    # the validator ran under the venv made for the run, which held the pinned toolkit
    # installed from the controller's tarball (same bytes) ...
    assert installed["wheelhouse_sha256"] == hashlib.sha256(shipped.read_bytes()).hexdigest()
    assert installed["wheels"] == ["torch-2.9.1+cu128-py3-none-any.whl"]
    toolkit = installed["toolkit"]
    assert (toolkit["installed"], toolkit["version"], toolkit["cuda"]) == (
        True, "2.9.1+cu128", "12.8")  # fmt: skip
    assert toolkit["path"].startswith(installed["venv"] + "/")
    assert Path(installed["venv"]).parent.parent == host_dir
    # ... and nothing of it is left on the host: neither the venv nor the shipped copy
    assert not Path(installed["venv"]).exists()
    assert sorted(p.name for p in host_dir.iterdir()) == []


def test_a_wheel_that_differs_from_its_lock_stops_the_run_before_any_launch(
    cli: Any, cloud_env: CloudEnv, tmp_path: Path
) -> None:
    lock, url = _stand_in(tmp_path / "toolkit")
    # the index now serves other bytes under the locked name (a changed upload, a mirror)
    served = next((tmp_path / "toolkit" / "index" / "torch").glob("*.whl"))
    other = fake_torch_wheel(tmp_path / "other", cuda="12.6")
    shutil.copy(other, served)
    override = _with_toolkit(write_override(tmp_path, [HEALTHY], cloud=cloud_env.cloud), lock, url)
    image = cloud_env.seed_candidate()
    result = _validate(cli, cloud_env, image.image_id, override)
    assert result.code == 2, (result.out, result.err)
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in result.err
    assert cloud_env.live_instances() == []
    assert not _known(cloud_env, image) or _receipts(cloud_env.cloud, image.image_id) == []


def _known(env: CloudEnv, image: Any) -> bool:
    from imagectl.catalog import repository as repo
    from imagectl.catalog.db import open_catalog

    with open_catalog().transaction() as s:
        return any(r.cloud_image_id == image.image_id for r in repo.list_images(s, cloud=env.cloud))


# -- which runs ship a toolkit (no hosts) ------------------------------------------------------
@pytest.fixture(scope="module")
def h100() -> Any:
    return load_resolved(find_workspace().images, STACK)[1]


def _override(tmp_path: Path, doc: dict[str, Any]) -> InventoryOverride:
    path = tmp_path / "override.yaml"
    path.write_text(json.dumps(doc))
    return InventoryOverride.load(path)


def test_replays_judge_the_recorded_toolkit_and_get_none_unless_named(h100, tmp_path) -> None:
    replays = _override(tmp_path, {"default_slot": {"validate_snapshot": str(HEALTHY)}})
    assert run_wheelhouse(h100, "quick", replays) is None
    assert not ships_to(replays, 0)
    # a live slot needs the stack's own lock (not committed here: the run stops, exit 2)
    mixed = _override(tmp_path, {"slots": [{"validate_snapshot": str(HEALTHY)}, {}]})
    assert ships_to(mixed, 1) and not ships_to(mixed, 0)
    with pytest.raises(UserError, match=r"torch-2\.9\.1-cu128\.lock"):
        run_wheelhouse(h100, "quick", mixed)


def test_no_toolkit_for_the_boot_profile_a_baked_stack_or_a_stack_without_one(
    h100, tmp_path
) -> None:
    lock, url = _stand_in(tmp_path / "toolkit")
    named = _override(tmp_path, {"toolkit": {"lock": str(lock), "index_url": url}})
    assert run_wheelhouse(h100, "boot", named) is None
    baked = h100.stack.model_copy(
        update={"validation": h100.stack.validation.model_copy(
            update={"toolkit": h100.stack.validation.toolkit.model_copy(
                update={"install": "bake"})})})  # fmt: skip
    assert run_wheelhouse(dataclasses.replace(h100, stack=baked), "quick", named) is None
    local = load_resolved(find_workspace().images, "local")[1]
    assert run_wheelhouse(local, "quick", named) is None


def test_an_override_toolkit_without_its_lock_is_exit_2(tmp_path) -> None:
    with pytest.raises(UserError, match="no lock file at"):
        _override(tmp_path, {"toolkit": {"lock": "missing.lock"}})
    with pytest.raises(UserError, match="toolkit needs a lock file"):
        _override(tmp_path, {"toolkit": {"index_url": "file:///x"}})
