"""``imagectl validate-image`` per cloud against an instance that really boots, then
``imagectl promote``: AWS (a moto server), Google Cloud and Azure (their local API fakes),
each given a ``GuestHost`` (tests/fakes/guests.py) so the instance the REAL provider
launches is a QEMU guest of the local candidate, with the cloud's own login semantics.

Per cloud, one guest boots in the whole session (TCG: 30-60 s), and everything that
needs a booted guest happens on it:

1. ``imagectl validate-image ID --cloud C --stack h100-training --runner-cidr
   127.0.0.1/32 --inventory-override F --sandbox --json`` (a subprocess): the provider
   launches the shape, the fake boots the guest and hands the run's key to the user the
   cloud dictates (AWS: the Canonical lineage's ``ubuntu``; GCP: the metadata
   ``ssh-keys`` user; Azure: ``osProfile.adminUsername``), and ``playbooks/validate.yml``
   reaches it over SSH at the address the cloud reports, as the user production chooses
   (``CloudSpec.login_user``; the override sets no ``ansible_user`` and no local
   connection), ships a healthy snapshot of the shape and runs the image's own validator
   (``/opt/imagectl/bin/imagectl``) through sudo in replay (``--sandbox``) mode.
   Asserted: exit 0, ``validated``, the receipt in the catalog bound to the image id and
   the stack digest, an attestation signed by the configured signer, the instance
   terminated and its VM gone.
2. The login semantics, checked on that very instance right before the cloud terminates
   it (a hook in the fake's terminate: AWS's TerminateInstances, GCP's instances.delete,
   Azure's virtualMachines delete): the cloud's user logs in with the run's key and has
   passwordless sudo, another user with the same key is refused, and once the security
   group / firewall rule / NSG no longer admits 127.0.0.1 (changed through the cloud's
   API) the connection is closed before SSH starts.
3. ``imagectl promote ID --json`` (a subprocess) exits 0 and every target region's
   pointer names the image or its copy there.

Without the SSH user from the cloud spec (the old fixed ``--ssh-user ubuntu``), the GCP
and Azure runs cannot log in: the key belongs to ``imagectl`` there, and step 2 checks
that ``ubuntu`` with the run's key is refused on the very guest the run validated (run
with ``ansible_user: ubuntu`` in the override, validate-image ends inconclusive after
``Permission denied``: checked by hand, not kept, as it costs a boot per cloud).

Timings on a loaded 2-core machine without KVM: 90-145 s per test (the guest's sshd
answers after 30-45 s, Ansible and the validator in the guest take the rest; the login
checks 4-8 s, promote 3-5 s).

The guest image: ``IMAGECTL_GUEST_STATE_DIR`` (an ``imagectl run --stack local`` state
folder), else the e2e state folder (test_e2e.py, which runs before this module, leaves its
candidate there), else ``~/.local/state/imagectl``; none: skipped, but under CI=true
the session's first run (``promoted_run``, shared by the xdist workers) makes it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from needs import in_ci, require_root, require_tool
from ruamel.yaml import YAML

from imagectl.supply.lock import LockSpec, toolkit_requirement, write_lock
from imagectl.supply.targets import PLATFORMS
from imagectl.tags import TAG_SOURCE_IMAGE
from imagectl.toolkit import target_python
from tests.clouds.scenario import HEALTHY, snapshot_on
from tests.fakes import moto_guests
from tests.fakes.azure_arm import FakeAzureArm
from tests.fakes.fixtures import CloudEnv, azure_serving, gcp_serving, resolved_stack
from tests.fakes.gcp_compute import FakeGcpCompute
from tests.fakes.guest_launch import CANONICAL, ELSEWHERE, aws_candidate, make_key, ssh
from tests.fakes.guests import GuestHost, GuestImage, find_guest_image
from tests.fakes.server import FakeServer, Request, Response
from tests.support import fake_torch_wheel, simple_index

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("clouds")]
REPO = Path(__file__).resolve().parents[2]
IMAGECTL = str(Path(sys.executable).parent / "imagectl")
STACK = "h100-training"
OLD_USER = "ubuntu"  # validate-image's fixed --ssh-user before CloudSpec.login_user
RUNNER = "127.0.0.1/32"  # the loopback peer every connection of this machine comes from


# -- the guest image and the host that boots it -------------------------------------------
@pytest.fixture(scope="module")
def guest_image(request: pytest.FixtureRequest) -> GuestImage:
    require_root()  # the forwarders listen on 127.0.0.N:22, as a cloud's SSH does
    for tool in ("qemu-system-x86_64", "qemu-img", "ssh", "ssh-keygen", "ansible-playbook"):
        require_tool(tool)
    folders = [os.environ.get("IMAGECTL_GUEST_STATE_DIR"), os.environ.get("IMAGECTL_E2E_STATE_DIR"),
               str(Path.home() / ".local" / "state" / "imagectl")]  # fmt: skip
    for folder in filter(None, folders):
        found = find_guest_image(Path(folder))
        if found is not None:
            return found
    if not in_ci():
        pytest.skip("no local candidate: run `imagectl run --stack local` first")
    # the session's first run (test_e2e.py's; under xdist whichever worker ran it first)
    code, _data, err = request.getfixturevalue("promoted_run")
    assert code == 0, err[-4000:]
    state: Path = request.getfixturevalue("e2e_state")
    found = find_guest_image(state)
    assert found is not None, f"imagectl run left no candidate in {state}"
    return found


@pytest.fixture
def guest_host(guest_image: GuestImage, tmp_path: Path) -> Iterator[GuestHost]:
    # one node per run here: no private network, so every guest (GCP's too, which
    # gives each instance its networkIP) starts from the candidate's saved boot
    host = GuestHost(guest_image, tmp_path / "guests", vpc=False)
    try:
        yield host
    finally:
        host.close()
        assert host._children.pids() == [], "a VM outlived its test"


@pytest.fixture
def signer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """The attestation signer (a file key, as a KMS URI would be given) and the trust
    file naming it (as the repository's anchor would, once enrolled): its key id."""
    from securesystemslib.signer import CryptoSigner

    from imagectl.provenance.keys import trust_document

    made = CryptoSigner.generate_ed25519()
    key = tmp_path / "attestation.pem"
    key.write_bytes(made.private_bytes)
    key.chmod(0o600)
    trust = tmp_path / "attestation-trust.json"
    trust.write_text(trust_document([made.public_key]))
    monkeypatch.setenv("IMAGECTL_ATTESTATION_SIGNER", f"file2:{key}")
    monkeypatch.setenv("IMAGECTL_ATTESTATION_TRUST", str(trust))
    return str(made.public_key.keyid)


# -- the login checks, on the run's own instance before the cloud terminates it -----------
@dataclass
class LoginProbe:
    """Called by the fake when the cloud is asked to terminate the (one) booted instance,
    before it does: records what each login attempt gave; ``check()`` asserts."""

    host: GuestHost
    key: Path
    cloud_user: Callable[[], str]  # who the cloud gave the run's key to (its own record)
    revoke: Callable[[], None]  # the cloud's rule stops admitting 127.0.0.1 (its API)
    seen: dict[str, Any] = field(default_factory=dict)

    def __call__(self) -> None:
        if self.seen or not self.host.guests:
            return
        started = time.monotonic()
        try:
            (guest,) = self.host.guests.values()
            self.seen["booted_s"] = started - guest.started  # boot + validation
            user = self.seen["user"] = self.cloud_user()
            # on GCP and Azure the other user is OLD_USER: the run before the SSH user
            # came from the cloud spec logged in as it, and was refused there
            other = OLD_USER if user != OLD_USER else "imagectl"
            self.seen["other_user"] = other
            self.seen["logins"] = [u for u, _ in guest.logins]
            self.seen["login"] = _ran(ssh(self.key, user, guest.address))
            self.seen["sudo"] = _ran(ssh(self.key, user, guest.address, "sudo -n id -un"))
            # restored from the first run's saved boot (the same image and shape), with
            # the clock the hand-over set: the saved VM's stood still since it was saved
            self.seen["saved_boot"] = (guest.saved_boot, guest.handover_error)
            clock = _ran(ssh(self.key, user, guest.address, "date +%s"))
            self.seen["clock_skew_s"] = abs(float(clock[1] or 0) - time.time())
            self.seen["other"] = _ran(ssh(self.key, other, guest.address))
            self.revoke()
            self.seen["revoked"] = _ran(ssh(self.key, user, guest.address))
        except Exception as exc:  # an assertion here would only turn into a 500 answer
            self.seen["error"] = repr(exc)
        self.seen["probe_s"] = time.monotonic() - started

    def check(self, expected_user: str) -> None:
        seen = self.seen
        assert seen, "the run never terminated a booted instance"
        assert "error" not in seen, seen
        assert seen["user"] == expected_user and seen["logins"] == [expected_user], seen
        assert seen["login"][:2] == (0, expected_user), seen["login"]
        assert seen["sudo"][:2] == (0, "root"), seen["sudo"]
        assert seen["saved_boot"] == ("restore", None), seen
        assert seen["clock_skew_s"] < 30, seen
        assert expected_user == OLD_USER or seen["other_user"] == OLD_USER, seen
        code, _, err = seen["other"]
        assert code == 255 and "Permission denied" in err, seen["other"]
        code, _, err = seen["revoked"]  # closed before the key exchange: no login refusal
        assert code == 255 and "Permission denied" not in err, seen["revoked"]
        assert any(w in err for w in ("closed", "reset", "Connection")), err


def _ran(result: subprocess.CompletedProcess[str]) -> tuple[int, str, str]:
    return result.returncode, result.stdout.strip(), result.stderr


def _before(fake: FakeServer, method: str, path: str, hook: Callable[[], None]) -> None:
    """Run ``hook`` when the fake receives ``method path``, then answer as it would."""

    def respond(req: Request) -> Response:
        hook()
        for m, pattern, func in fake._routes:
            match = pattern.match(req.path)
            if m == req.method and match:
                with fake.lock:
                    return func(Request(req.method, req.path, req.query, req.body,
                                        req.headers, match))  # fmt: skip
        return 404, fake.not_found(req.path), {}

    fake.add_fault(respond, method=method, path=path, times=None)


# -- the commands ----------------------------------------------------------------------------
def _override(tmp_path: Path, cloud: str, toolkit: bool) -> Path:
    """Every host replays a healthy snapshot of the shape (the validator in the guest
    reads it); nothing about how to reach the host or as whom: that is production's.

    With ``toolkit`` (one cloud: the install is the same code on each, and it costs a
    TCG guest a pip run) the stack's GPU toolkit travels with the validation (the image
    carries none): the override names a stand-in toolkit (tests/support.py
    ``fake_torch_wheel``, laid out like torch 2.9.1+cu128) locked by the real lock code
    for the stack's Python and served by a PEP 503 index on disk, as a lab's mirror
    would be named. torch's own lock is not in the repository here (download.pytorch.org
    is unreachable from this machine); the controller makes the hashed wheelhouse from
    this lock, ships it, and the guest's validator installs it into a venv for the run
    and removes it."""
    snapshot = str(snapshot_on(cloud, HEALTHY, tmp_path))
    url = simple_index(tmp_path / "toolkit-index", [fake_torch_wheel(tmp_path / "toolkit")])
    lock = write_lock(LockSpec(
        path=tmp_path / "torch-2.9.1-cu128.lock", title="stand-in torch 2.9.1 (cu128)",
        command="test", requirements=(toolkit_requirement("2.9.1", "cu128"),), index_url=url,
        pythons=(target_python(resolved_stack()),), platforms=PLATFORMS,
    ))  # fmt: skip
    path = tmp_path / "override.yaml"
    override: dict[str, Any] = {"slots": [{"validate_snapshot": snapshot}],
                                "default_slot": {"validate_snapshot": snapshot}}  # fmt: skip
    if toolkit:
        override["toolkit"] = {"lock": str(lock), "index_url": url}
    with path.open("w") as fh:
        YAML().dump(override, fh)
    return path


def _imagectl(*args: str, timeout: float = 600) -> tuple[int, dict[str, Any], str, float]:
    env = dict(os.environ)
    # The command's own deadline ends it before the test's timeout, naming the call it was
    # waiting on (a bare TimeoutExpired showed nothing: the Azure test hung once, 600 s,
    # beside the other e2e worker, 2026-11-28; alone it takes 31-39 s)
    env.update(IMAGECTL_CLOUD_POLL_S="0.5", COLUMNS="160", PYTHONUNBUFFERED="1",
               IMAGECTL_DEADLINE_S=str(int(timeout * 0.6)))  # fmt: skip
    started = time.monotonic()
    proc = subprocess.run(
        [IMAGECTL, "--root", str(REPO), *args, "--json"],
        capture_output=True, text=True, env=env, timeout=timeout, check=False,
    )  # fmt: skip
    took = time.monotonic() - started
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"no JSON from imagectl {args[0]} (exit {proc.returncode}):\n"
                    f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")  # fmt: skip
    return proc.returncode, data, proc.stderr, took


def _validate_and_promote(
    cloud: str,
    image_id: str,
    host: GuestHost,
    probe: LoginProbe,
    expected_user: str,
    keyid: str,
    tmp_path: Path,
    toolkit: bool = False,
) -> None:
    from imagectl.catalog import repository as repo
    from imagectl.catalog.db import open_catalog

    resolved = resolved_stack()
    code, result, err, took = _imagectl(
        "validate-image", image_id, "--cloud", cloud, "--stack", STACK,
        "--runner-cidr", RUNNER, "--inventory-override", str(_override(tmp_path, cloud, toolkit)),
        "--ssh-key", str(probe.key), "--sandbox",
    )  # fmt: skip
    print(
        f"{cloud}: validate-image {took:.0f} s (guest up {probe.seen.get('booted_s', 0):.0f} s "
        f"before terminate; login checks {probe.seen.get('probe_s', 0):.0f} s)"
    )
    serial = "\n".join(
        p.read_text(errors="replace")[-1500:] for p in host.workdir.glob("*.serial.log")
    )
    assert code == 0, f"{json.dumps(result, indent=1)[-3000:]}\n{err[-3000:]}\n{serial}"
    assert result["state"] == "validated" and result["receipts"] == "sandbox replay", result
    assert result["attestation"], result
    (launched,) = result["launched"]
    assert result["terminated"] == [launched["instance_id"]]
    # exactly one guest booted, and it is gone with its instance
    assert len(host.history) == 1 and host.guests == {}, (host.history, host.guests)
    assert host._children.pids() == []
    probe.check(expected_user)

    with open_catalog().transaction() as s:
        (row,) = [r for r in repo.list_images(s, cloud=cloud) if r.cloud_image_id == image_id]
        assert (row.stack, row.stack_digest, row.state) == (STACK, resolved.digest, "validated")
        (run,) = repo.receipts(s, row)
        body = run.body
        assert (body.image_id, body.stack_digest) == (image_id, resolved.digest)
        assert (run.verdict, body.mode, body.sandbox) == ("pass", "replay", True)
        if toolkit:  # the validator ran under the toolkit installed in the guest for the run
            installed = body.host["toolkit_venv"]
            assert installed["toolkit"]["version"] == "2.9.1+cu128", installed
            assert installed["wheels"] == ["torch-2.9.1+cu128-py3-none-any.whl"], installed
            assert result["toolkit_wheelhouse"], result
        else:  # a replay judges the toolkit its snapshot recorded: none is shipped
            assert not body.host.get("toolkit_venv") and not result.get("toolkit_wheelhouse")
        assert run.host == launched["instance_id"]
        attestation = repo.latest_attestation(s, row)
        assert attestation is not None and attestation.keyid == keyid
        assert attestation.digest == result["attestation"]

    code, promoted, err, took = _imagectl("promote", image_id)
    print(f"{cloud}: promote {took:.0f} s")
    assert code == 0, f"{json.dumps(promoted, indent=1)[-3000:]}\n{err[-3000:]}"
    assert promoted["state"] == "promoted", promoted
    regions = list(getattr(resolved.stack.clouds, cloud).regions)
    replicas = {r: v["replica_id"] for r, v in promoted["regions"].items()}
    assert sorted(replicas) == sorted(regions), replicas
    provider = CloudEnv(cloud, None).provider()  # the endpoint from the environment
    for region, replica in replicas.items():
        pointer = provider.get_pointer(STACK, region)
        assert replica and pointer, (region, replica, pointer)
        if pointer != replica:  # GCP: the family's member made from the image
            member = provider.get_image(pointer, region)
            assert member is not None and member.tags.get(TAG_SOURCE_IMAGE) == replica, (
                region, pointer, member)  # fmt: skip


# -- AWS ---------------------------------------------------------------------------------------
def test_aws_validate_image_on_a_booted_instance_then_promote(
    moto_server: str,
    guest_host: GuestHost,
    signer: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    import boto3
    from moto.ec2.responses.instances import InstanceResponse

    region = resolved_stack().stack.clouds.aws.build.region
    ec2 = boto3.client("ec2", region_name=region, endpoint_url=moto_server)
    # Packer's amazon-ebs way: an instance of Canonical's base AMI, then CreateImage
    # (built before guests boot); tagged with the stack as the build tags it
    candidate = aws_candidate(CANONICAL, endpoint=moto_server)
    env = CloudEnv("aws", None)
    tags = {"imagectl:managed": "true", **env.tags()}
    ec2.create_tags(Resources=[candidate], Tags=[{"Key": k, "Value": v} for k, v in tags.items()])
    moto_guests.attach(guest_host)
    try:
        key, _ = make_key(tmp_path)

        def revoke() -> None:
            (guest,) = guest_host.guests.values()
            (reservation,) = ec2.describe_instances(InstanceIds=[guest.instance_id])["Reservations"]
            raw = reservation["Instances"][0]
            # an EFA shape names its group on its interfaces (moto lists it there only)
            groups = raw["SecurityGroups"] or raw["NetworkInterfaces"][0]["Groups"]
            for group in groups:
                ec2.revoke_security_group_ingress(
                    GroupId=group["GroupId"],
                    IpPermissions=[{"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22,
                                    "IpRanges": [{"CidrIp": RUNNER}]}],
                )  # fmt: skip

        def cloud_user() -> str:
            (guest,) = guest_host.guests.values()
            return str(moto_guests.GUESTS.instance_users[guest.instance_id])

        probe = LoginProbe(guest_host, key, cloud_user, revoke)
        terminate = InstanceResponse.terminate_instances  # moto_guests' (stops the guest)

        def terminate_instances(self: Any) -> Any:
            probe()
            return terminate(self)

        monkeypatch.setattr(InstanceResponse, "terminate_instances", terminate_instances)
        _validate_and_promote(
            "aws", candidate, guest_host, probe, "ubuntu", signer, tmp_path, toolkit=True
        )
    finally:
        moto_guests.detach()


# -- Google Cloud ------------------------------------------------------------------------------
@pytest.fixture
def gcp_booting(monkeypatch: pytest.MonkeyPatch, guest_host: GuestHost) -> Iterator[FakeGcpCompute]:
    with gcp_serving(monkeypatch, guest_host) as fake:
        yield fake


def test_gcp_validate_image_on_a_booted_instance_then_promote(
    gcp_booting: FakeGcpCompute, guest_host: GuestHost, signer: str, tmp_path: Path
) -> None:
    env = CloudEnv("gcp", gcp_booting)
    candidate = env.seed_candidate()
    key, _ = make_key(tmp_path)

    def cloud_user() -> str:
        (inst,) = gcp_booting.instances.values()
        items = inst["metadata"]["items"]
        return str(next(i["value"] for i in items if i["key"] == "ssh-keys").split(":", 1)[0])

    def revoke() -> None:
        provider = env.provider()
        for rule in list(gcp_booting.firewalls):
            provider.clients.wait(
                provider.clients.firewalls.delete(project=provider.project, firewall=rule)
            )
        assert not gcp_booting.firewalls

    probe = LoginProbe(guest_host, key, cloud_user, revoke)
    _before(gcp_booting, "DELETE", r"/zones/[^/]+/instances/[^/]+$", probe)
    _validate_and_promote("gcp", candidate.image_id, guest_host, probe, "imagectl", signer,
                          tmp_path)  # fmt: skip


# -- Azure -------------------------------------------------------------------------------------
@pytest.fixture
def azure_booting(monkeypatch: pytest.MonkeyPatch, guest_host: GuestHost) -> Iterator[FakeAzureArm]:
    with azure_serving(monkeypatch, guest_host) as fake:
        yield fake


def test_azure_validate_image_on_a_booted_vm_then_promote(
    azure_booting: FakeAzureArm, guest_host: GuestHost, signer: str, tmp_path: Path
) -> None:
    env = CloudEnv("azure", azure_booting)
    candidate = env.seed_candidate()
    key, _ = make_key(tmp_path)

    def cloud_user() -> str:
        (vm,) = [
            r for r in azure_booting.resources.values() if r["type"].endswith("virtualMachines")
        ]
        return str(vm["properties"]["osProfile"]["adminUsername"])

    def revoke() -> None:
        """The NSG's SSH rule, rewritten through ARM to admit another address only."""
        fake = azure_booting
        (nsg,) = [r for r in fake.resources.values() if r["type"].endswith("networkSecurityGroups")]
        rg = nsg["id"].split("/resourceGroups/")[1].split("/")[0]
        ops = env.provider().clients.network.network_security_groups
        current = ops.get(rg, nsg["name"])
        for rule in current.security_rules:
            rule.source_address_prefix = ELSEWHERE
        ops.begin_create_or_update(rg, nsg["name"], current).result()

    probe = LoginProbe(guest_host, key, cloud_user, revoke)
    _before(azure_booting, "DELETE", r"(?i)/providers/Microsoft\.Compute/virtualMachines/[^/]+$",
            probe)  # fmt: skip
    _validate_and_promote("azure", candidate.image_id, guest_host, probe, "imagectl", signer,
                          tmp_path)  # fmt: skip
