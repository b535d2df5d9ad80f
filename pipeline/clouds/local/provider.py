"""The LOCAL provider: an image registry on disk whose "regions" are directories.

Layout under the registry root (default ``<state dir>/registry``; ``root=`` or
``$IMAGECTL_LOCAL_REGISTRY`` override it)::

    <root>/<region>/images/<hex>.<qcow2|raw>   the image file, content-addressed
    <root>/<region>/images/<hex>.json          its metadata (name, stack, digest, tags,
                                               state, shared_with, deprecation)
    <root>/<region>/copies/<hex>-<token>.json  copy requests, keyed by image and token
    <root>/<region>/stacks/<stack>/latest      the stack's "latest" pointer (an image id)
    <root>/<region>/stacks/<stack>/canary      its canary pointer beside it
    <root>/instances/<id>.json                 instances registered as running an image

An image id is ``sha256:<hex>``, the sha256 of the disk file, so the same image has the
same id in every region and a region can never hold two copies of one image.

Replication behaves like a cloud's asynchronous copy: ``replicate(image, region, token=)``
records a copy request and returns ``pending`` (the same token returns the same request:
idempotent); ``replica_status`` reports ``pending`` until the region's latency has passed
since the request, then hard-links (or copies, ``link=False`` or across file systems) the
file into the region atomically and reports ``available``. Requests live on disk, so a
killed process finds them again.

Injection for tests and the benchmark (constructor options, or environment variables for
subprocesses):

- ``latency``: seconds per region, ``{"local-a": 0.2}`` or one float for all;
  ``$IMAGECTL_LOCAL_LATENCY="local-a=0.2,local-b=0.5"`` or ``"0.3"``.
- ``fail``: ``{"local-b": "copy"}`` (``replicate`` raises ``CloudError``) or
  ``{"local-b": "replica"}`` (the copy ends ``failed``); ``$IMAGECTL_LOCAL_FAIL=
  "local-b=replica"``.

Instances are VMs (``vms``): ``launch`` boots the image in QEMU from an overlay, with the
run's key for the cloud's login user (root) handed in as a guest agent would get it;
``wait_reachable`` waits until SSH answers on the forwarded 127.0.0.1 port;
``terminate`` stops the VM and removes its overlay. ``<root>/instances/<id>.json`` records
each (pid, port, TTL tag), so another process (``imagectl reap``) finds and stops it.

Import a built disk with ``import_image(path, region=, stack=, digest=, boot=)``; ``boot``
(kernel, initrd, accelerator) is what launches it (direct kernel boot).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from imagectl.clouds.base import (
    CloudImage,
    ImageQuery,
    Instance,
    LaunchRequest,
    Provider,
    ReplicaStatus,
)
from imagectl.clouds.common import NotReachable
from imagectl.clouds.local import saved_boot, vms
from imagectl.clouds.local.spec import SPEC, LocalOptions
from imagectl.core.errors import CloudError, UserError
from imagectl.core.fsutil import atomic_write, sha256_file
from imagectl.paths import state_dir
from imagectl.settings import parse_seconds
from imagectl.stacks.schema import Sharing
from imagectl.tags import TAG_DIGEST, TAG_LAUNCHED_BY, TAG_MANAGED, TAG_STACK, TAG_STATE, TAG_TTL

ENV_REGISTRY = "IMAGECTL_LOCAL_REGISTRY"
ENV_LATENCY = "IMAGECTL_LOCAL_LATENCY"
ENV_FAIL = "IMAGECTL_LOCAL_FAIL"
ENV_SAVED_BOOTS = "IMAGECTL_LOCAL_SAVED_BOOTS"  # "0": every instance boots
FAIL_MODES = ("copy", "replica")
ID_PREFIX = "sha256:"


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _hex(image_id: str) -> str:
    if not image_id.startswith(ID_PREFIX) or len(image_id) != len(ID_PREFIX) + 64:
        raise UserError(
            f"'{image_id}' is not a local image id",
            hint="Local image ids are sha256:<64 hex digits> (see `imagectl status`)",
        )
    return image_id[len(ID_PREFIX) :]


def file_digest(path: Path) -> str:
    """``sha256:<hex>`` of a file."""
    return ID_PREFIX + sha256_file(path)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomic write: a reader sees the old or the new file, never half of one."""
    atomic_write(path, json.dumps(data, indent=2, sort_keys=True, default=str))


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except json.JSONDecodeError as error:
        raise CloudError(
            f"the local registry file {path} is corrupt ({error})",
            hint="Delete it and replicate the image again",
        ) from None
    return data


def parse_latency(raw: str | float | dict[str, float] | None) -> dict[str, float] | float:
    if raw is None or raw == "":
        return 0.0
    if isinstance(raw, int | float):
        return float(raw)
    if isinstance(raw, dict):
        return {k: float(v) for k, v in raw.items()}
    if "=" not in raw:
        return parse_seconds(ENV_LATENCY, raw)
    out: dict[str, float] = {}
    for part in raw.split(","):
        region, _, value = part.partition("=")
        out[region.strip()] = parse_seconds(ENV_LATENCY, value)
    return out


def parse_fail(raw: str | dict[str, str] | None) -> dict[str, str]:
    if not raw:
        return {}
    pairs = (
        raw.items()
        if isinstance(raw, dict)
        else ((p.partition("=")[0], p.partition("=")[2] or "copy") for p in raw.split(","))
    )
    out = {}
    for region, mode in pairs:
        if mode not in FAIL_MODES:
            raise UserError(
                f"unknown local failure mode '{mode}' for region {region}",
                hint=f"Use one of: {', '.join(FAIL_MODES)}",
            )
        out[region.strip()] = mode
    return out


class LocalProvider(Provider):
    spec = SPEC
    cloud = SPEC.name
    poll_interval_s = 0.05  # how often promotion polls replica_status

    def __init__(self, options: LocalOptions | None = None) -> None:
        o = options or LocalOptions()
        root = o.root or os.environ.get(ENV_REGISTRY) or state_dir() / "registry"
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.latency = parse_latency(
            o.latency if o.latency is not None else os.environ.get(ENV_LATENCY)
        )
        self.fail = parse_fail(o.fail if o.fail is not None else os.environ.get(ENV_FAIL))
        self.link = o.link
        self.login_user = o.login_user  # the spec's login_user: the key goes to root
        self.memory_mib = o.memory_mib
        self.cpus = o.cpus
        self.saved_boots = (
            o.saved_boots
            if o.saved_boots is not None
            else os.environ.get(ENV_SAVED_BOOTS, "1").strip().lower() not in ("0", "false", "no")
        )
        if o.poll_interval_s is not None:
            self.poll_interval_s = o.poll_interval_s

    # -- paths --------------------------------------------------------------------

    def region_dir(self, region: str) -> Path:
        if not region or "/" in region or region.startswith("."):
            raise UserError(f"'{region}' is not a local region name")
        return self.root / region

    def _meta_path(self, region: str, hex_: str) -> Path:
        return self.region_dir(region) / "images" / f"{hex_}.json"

    def _pointer_path(self, stack: str, region: str) -> Path:
        return self.region_dir(region) / "stacks" / stack / "latest"

    def image_file(self, image_id: str, region: str) -> Path | None:
        meta = _read_json(self._meta_path(region, _hex(image_id)))
        if meta is None:
            return None
        return self.region_dir(region) / "images" / meta["file"]

    def regions(self) -> list[str]:
        return sorted(p.name for p in self.root.iterdir() if (p / "images").is_dir())

    def latency_of(self, region: str) -> float:
        if isinstance(self.latency, dict):
            return self.latency.get(region, 0.0)
        return self.latency

    @contextlib.contextmanager
    def _region_lock(self, region: str) -> Iterator[None]:
        folder = self.region_dir(region)
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / ".lock", "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # -- images -------------------------------------------------------------------
    def _to_image(self, region: str, meta: dict[str, Any]) -> CloudImage:
        created = meta.get("created_at")
        return CloudImage(
            cloud="local",
            region=region,
            image_id=meta["image_id"],
            name=meta.get("name", ""),
            state=meta.get("state", "available"),
            tags=dict(meta.get("tags", {})),
            created_at=dt.datetime.fromisoformat(created) if created else None,
        )

    def metadata(self, image_id: str, region: str) -> dict[str, Any] | None:
        """The raw metadata record of an image in a region (sharing, deprecation...)."""
        return _read_json(self._meta_path(region, _hex(image_id)))

    def _place(self, src: Path, region: str, hex_: str, suffix: str) -> str:
        """Put ``src`` into the region as ``<hex><suffix>`` atomically; return the name.
        Called under the region's lock; removes what a killed copy left behind."""
        images = self.region_dir(region) / "images"
        images.mkdir(parents=True, exist_ok=True)
        name = f"{hex_}{suffix}"
        dest = images / name
        if dest.exists():
            return name
        # Only _place writes these, under the region lock: any left are a killed copy's.
        for stale in images.glob(f".{name}.*.tmp"):
            with contextlib.suppress(OSError):
                stale.unlink()
        tmp = images / f".{name}.{uuid.uuid4().hex}.tmp"
        linked = False
        try:
            if self.link:
                try:
                    os.link(src, tmp)
                    linked = True
                except OSError:
                    linked = False
            if not linked:
                shutil.copyfile(src, tmp)
            os.replace(tmp, dest)
        except BaseException as exc:  # a full disk or Ctrl-C leaves no partial copy
            with contextlib.suppress(OSError):
                tmp.unlink()
            if isinstance(exc, OSError):
                raise CloudError(
                    f"cannot copy the image into {images}: {exc.strerror or exc}",
                    hint="Free space there and replicate again",
                ) from exc
            raise
        return name

    def import_image(
        self,
        path: str | os.PathLike[str],
        *,
        region: str,
        stack: str,
        digest: str,
        name: str | None = None,
        tags: dict[str, str] | None = None,
        boot: vms.BootFiles | None = None,
    ) -> CloudImage:
        """Add a built disk file to ``region``; idempotent (same file, same id). ``boot``:
        the kernel and initrd it boots with (kept in the registry) and the accelerator."""
        src = Path(path)
        if not src.is_file():
            raise UserError(f"no image file at {src}", hint="Build the image first")
        image_id = file_digest(src)
        hex_ = _hex(image_id)
        suffix = src.suffix if src.suffix in (".qcow2", ".raw", ".img") else ".qcow2"
        with self._region_lock(region):
            meta = _read_json(self._meta_path(region, hex_))
            if meta is None:
                filename = self._place(src, region, hex_, suffix)
                meta = {
                    "image_id": image_id,
                    "file": filename,
                    "name": name or src.stem,
                    "state": "available",
                    "created_at": _now().isoformat(),
                    "source": str(src),
                    "tags": {
                        TAG_MANAGED: "true",
                        TAG_STACK: stack,
                        TAG_DIGEST: digest,
                        **(tags or {}),
                    },
                    "shared_with": None,
                }
            if boot is not None:
                meta["boot"] = self._keep_boot_files(boot)
            _write_json(self._meta_path(region, hex_), meta)
        return self._to_image(region, meta)

    def _keep_boot_files(self, boot: vms.BootFiles) -> dict[str, str]:
        """Kernel and initrd copied into ``<root>/boot`` by content (a rebuilt base cannot
        take them away from the images that boot with them)."""
        out = {"accel": boot.accel}
        folder = self.root / "boot"
        folder.mkdir(parents=True, exist_ok=True)
        for kind, src in (("kernel", boot.kernel), ("initrd", boot.initrd)):
            dest = folder / f"{_hex(file_digest(src))}.{kind}"
            if not dest.exists():
                tmp = folder / f".{dest.name}.{uuid.uuid4().hex}.tmp"
                shutil.copyfile(src, tmp)
                os.replace(tmp, dest)
            out[kind] = str(dest)
        return out

    def boot_files(self, image: CloudImage) -> vms.BootFiles:
        meta = self.metadata(image.image_id, image.region) or {}
        boot = meta.get("boot")
        if not boot:
            raise UserError(
                f"local image {image.image_id} in {image.region} has no boot files "
                "(kernel, initrd) recorded, so it cannot be launched",
                hint="Build it again with `imagectl build --stack local --cloud local`",
            )
        return vms.BootFiles(Path(boot["kernel"]), Path(boot["initrd"]), boot.get("accel", "tcg"))

    def query_images(self, query: ImageQuery) -> list[CloudImage]:
        out = []
        for reg in [query.region] if query.region else self.regions():
            folder = self.region_dir(reg) / "images"
            if not folder.is_dir():
                continue
            for meta_path in sorted(folder.glob("*.json")):
                meta = _read_json(meta_path)
                if meta is None:
                    continue
                img = self._to_image(reg, meta)
                if query.stack and img.tags.get(TAG_STACK) != query.stack:
                    continue
                if query.digest and img.tags.get(TAG_DIGEST) != query.digest:
                    continue
                if query.state and query.state not in (img.state, img.tags.get(TAG_STATE)):
                    continue
                out.append(img)
        return out

    def get_image(self, image_id: str, region: str) -> CloudImage | None:
        meta = self.metadata(image_id, region)
        return self._to_image(region, meta) if meta else None

    def _update(self, image: CloudImage, **changes: Any) -> dict[str, Any]:
        hex_ = _hex(image.image_id)
        with self._region_lock(image.region):
            meta = _read_json(self._meta_path(image.region, hex_))
            if meta is None:
                raise CloudError(f"local image {image.image_id} is not in region {image.region}")
            tags = changes.pop("tags", None)
            if tags:
                meta["tags"] = {**meta.get("tags", {}), **tags}
            meta.update(changes)
            _write_json(self._meta_path(image.region, hex_), meta)
        return meta

    def set_tags(self, image: CloudImage, tags: dict[str, str]) -> None:
        self._update(image, tags={k: str(v) for k, v in tags.items()})

    # -- instances ----------------------------------------------------------------
    def _instance_path(self, instance_id: str) -> Path:
        return self.root / "instances" / f"{instance_id}.json"

    def _instance(self, raw: dict[str, Any]) -> Instance:
        launched = raw.get("launched_at")
        return Instance(
            cloud="local",
            region=raw["region"],
            instance_id=raw["instance_id"],
            shape=raw["shape"],
            image_id=raw["image_id"],
            state=raw["state"],
            address=raw.get("address"),
            tags=raw.get("tags", {}),
            launched_at=dt.datetime.fromisoformat(launched) if launched else None,
            ssh_port=int(raw.get("port") or 22),
        )

    def register_instance(
        self,
        image: CloudImage,
        *,
        shape: str = "qemu-tcg",
        instance_id: str | None = None,
        address: str | None = None,
        tags: dict[str, str] | None = None,
    ) -> Instance:
        """Record a machine that runs ``image`` but was not launched here (a fleet node of
        the local cloud): fleet drift and retention see it; ``terminate`` forgets it."""
        record = {
            "instance_id": instance_id or f"local-{uuid.uuid4().hex[:12]}",
            "region": image.region,
            "shape": shape,
            "image_id": image.image_id,
            "state": "running",
            "address": address,
            "tags": {TAG_MANAGED: "true", **(tags or {})},
            "launched_at": _now().isoformat(),
        }
        _write_json(self._instance_path(str(record["instance_id"])), record)
        return self._instance(record)

    def launch(self, request: LaunchRequest) -> Instance:
        """Boot ``image`` (in its region) in QEMU; SSH is forwarded from 127.0.0.1 only,
        so ``allowed_cidr`` has nothing to admit beyond this machine."""
        if self.image_file(request.image.image_id, request.image.region) is None:
            raise CloudError(
                f"local image {request.image.image_id} is not in region {request.image.region}"
            )
        boot = self.boot_files(request.image)
        instance_id = f"local-{uuid.uuid4().hex[:12]}"
        tags = {
            TAG_MANAGED: "true",
            TAG_STACK: request.stack,
            TAG_LAUNCHED_BY: request.launched_by,
            TAG_TTL: (_now() + request.ttl).isoformat(),
        }
        record: dict[str, Any] = {
            "instance_id": instance_id,
            "region": request.image.region,
            "shape": request.shape,
            "image_id": request.image.image_id,
            "state": "pending",
            "address": "127.0.0.1",
            "tags": tags,
            "launched_at": _now().isoformat(),
        }
        # recorded before QEMU starts: a launch killed half-way is still found and reaped
        _write_json(self._instance_path(instance_id), record)
        file = self._source_file(request.image)
        vm = vms.start(
            self.root / "instances" / instance_id, image_file=file, boot=boot,
            login_user=self.login_user, public_key=request.ssh_public_key,
            memory_mib=self.memory_mib, cpus=self.cpus, name=f"imagectl-{instance_id}",
            image_id=request.image.image_id, saved=self.saved_boots,
        )  # fmt: skip
        record.update(state="running", pid=vm.pid, started=vm.started, port=vm.port)
        if vm.handover:  # the login goes with the hand-over (wait_reachable)
            record["handover"] = vm.handover.to_json()
            record["logins"] = (
                [[self.login_user, request.ssh_public_key]] if request.ssh_public_key else []
            )
        _write_json(self._instance_path(instance_id), record)
        return self._instance(record)

    def wait_reachable(self, instance: Instance, *, timeout_s: float) -> Instance:
        """Until the guest's SSH server answers on its forwarded port; the VM dying or the
        time passing is ``NotReachable`` with the serial console's last lines."""
        raw = _read_json(self._instance_path(instance.instance_id))
        if raw is None:
            raise NotReachable(instance.instance_id, "the instance is gone (terminated)")
        folder = self.root / "instances" / instance.instance_id
        deadline = time.monotonic() + timeout_s
        if raw.get("handover") and not raw.get("handed_over"):
            self._hand_over(instance.instance_id, raw, folder, timeout_s)
        while True:
            if not vms.alive(raw.get("pid", 0), raw.get("started", "")):
                tail = vms.serial_tail(folder) or vms.serial_tail(folder, "qemu.log")
                raise NotReachable(instance.instance_id, f"the VM stopped while booting: {tail}")
            if vms.ssh_banner("127.0.0.1", int(raw["port"])):
                return self._instance(raw)
            if time.monotonic() >= deadline:
                raise NotReachable(
                    instance.instance_id,
                    f"no SSH answer on 127.0.0.1:{raw['port']} within {timeout_s:g} s; "
                    f"serial console: {vms.serial_tail(folder)}",
                )
            time.sleep(max(self.poll_interval_s, 0.5))

    def _hand_over(
        self, instance_id: str, raw: dict[str, Any], folder: Path, timeout_s: float
    ) -> None:
        """A saved boot's VM: save it or resume it, then hand the login over
        (``saved_boot.hand_over``); a state that failed to load is discarded."""
        handover = saved_boot.Handover.from_json(raw["handover"])
        pid, started = raw.get("pid", 0), raw.get("started", "")
        try:
            saved_boot.hand_over(
                handover,
                [(str(u), str(k)) for u, k in raw.get("logins") or []],
                alive=lambda: vms.alive(pid, started),
                timeout_s=timeout_s,
            )
        except saved_boot.HandoverError as exc:
            if handover.mode == "restore" and not vms.alive(pid, started):
                saved_boot.discard(handover)  # the next launch boots (and saves anew)
            tail = vms.serial_tail(folder) or vms.serial_tail(folder, "qemu.log")
            raise NotReachable(
                instance_id, f"{exc} ({handover.mode} of {handover.folder}); serial: {tail}"
            ) from exc
        raw["handed_over"] = True
        _write_json(self._instance_path(instance_id), raw)

    def terminate(self, instance: Instance) -> None:
        path = self._instance_path(instance.instance_id)
        raw = _read_json(path)
        if raw is not None and raw.get("pid"):
            vms.stop(int(raw["pid"]), str(raw.get("started", "")))
        folder = self.root / "instances" / instance.instance_id
        shutil.rmtree(saved_boot.socket_dir(folder), ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

    def list_instances(self, *, managed_only: bool = True) -> list[Instance]:
        out = []
        folder = self.root / "instances"
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            raw = _read_json(path)
            if raw is None:
                continue
            if managed_only and raw.get("tags", {}).get(TAG_MANAGED) != "true":
                continue
            out.append(self._instance(raw))
        return out

    # -- promotion ----------------------------------------------------------------
    def _copy_path(self, region: str, token: str, image_id: str) -> Path:
        safe = hashlib.sha256(token.encode()).hexdigest()[:32]
        return self.region_dir(region) / "copies" / f"{_hex(image_id)}-{safe}.json"

    def _source_file(self, image: CloudImage) -> Path:
        path = self.image_file(image.image_id, image.region)
        if path is None or not path.exists():
            raise CloudError(f"local image {image.image_id} is not in region {image.region}")
        return path

    def replicate(self, image: CloudImage, region: str, *, token: str) -> ReplicaStatus:
        if region == image.region:
            return ReplicaStatus(region, "available", image.image_id)
        if self.fail.get(region) == "copy":
            raise CloudError(f"injected failure: copy of {image.image_id} into {region} refused")
        with self._region_lock(region):
            existing = _read_json(self._copy_path(region, token, image.image_id))
            if existing is not None:
                return ReplicaStatus(region, existing["state"], image.image_id, "same token")
            if self.metadata(image.image_id, region) is not None:
                return ReplicaStatus(region, "available", image.image_id, "already present")
            source = self._source_file(image)
            meta = self.metadata(image.image_id, image.region) or {}
            now = time.time()
            _write_json(
                self._copy_path(region, token, image.image_id),
                {
                    "token": token,
                    "image_id": image.image_id,
                    "source_region": image.region,
                    "source_file": str(source),
                    "requested_at": now,
                    "ready_at": now + self.latency_of(region),
                    "state": "pending",
                    "fail": self.fail.get(region) == "replica",
                    "name": image.name,
                    "tags": meta.get("tags", dict(image.tags)),
                    "boot": meta.get("boot"),
                },
            )
        return ReplicaStatus(region, "pending", image.image_id, "copy requested")

    def _pending_copy(self, image_id: str, region: str) -> tuple[Path, dict[str, Any]] | None:
        folder = self.region_dir(region) / "copies"
        found = None
        for path in sorted(folder.glob(f"{_hex(image_id)}-*.json")):
            raw = _read_json(path)
            if raw:
                found = (path, raw)
                if raw["state"] == "pending":
                    return found
        return found

    def replica_status(self, image: CloudImage, region: str) -> ReplicaStatus:
        if self.metadata(image.image_id, region) is not None:
            return ReplicaStatus(region, "available", image.image_id)
        unlocked = self._pending_copy(image.image_id, region)  # cheap poll, no lock
        if unlocked and unlocked[1]["state"] == "pending" and time.time() < unlocked[1]["ready_at"]:
            return ReplicaStatus(region, "pending", image.image_id)
        with self._region_lock(region):
            pending = self._pending_copy(image.image_id, region)
            if pending is None:
                return ReplicaStatus(region, "missing", None)
            path, copy = pending
            if copy["state"] != "pending":
                return ReplicaStatus(region, copy["state"], image.image_id, copy.get("detail", ""))
            if time.time() < copy["ready_at"]:
                return ReplicaStatus(region, "pending", image.image_id)
            if copy["fail"]:
                copy.update(state="failed", detail="injected failure: the copy failed")
                _write_json(path, copy)
                return ReplicaStatus(region, "failed", image.image_id, copy["detail"])
            src = Path(copy["source_file"])
            filename = self._place(src, region, _hex(image.image_id), src.suffix or ".qcow2")
            meta = {
                "image_id": image.image_id,
                "file": filename,
                "name": copy.get("name", ""),
                "state": "available",
                "created_at": _now().isoformat(),
                "source": f"{copy['source_region']}/{image.image_id}",
                "tags": copy.get("tags", {}),
                "shared_with": None,
                "boot": copy.get("boot"),
            }
            _write_json(self._meta_path(region, _hex(image.image_id)), meta)
            copy["state"] = "available"
            _write_json(path, copy)
        return ReplicaStatus(region, "available", image.image_id)

    def share(self, replica: CloudImage, sharing: Sharing) -> None:
        self._update(replica, shared_with=sharing.model_dump(mode="json"))

    def get_pointer(self, stack: str, region: str) -> str | None:
        try:
            return self._pointer_path(stack, region).read_text().strip() or None
        except FileNotFoundError:
            return None

    def set_pointer(self, stack: str, region: str, image_id: str) -> None:
        if self.metadata(image_id, region) is None:
            raise CloudError(f"cannot point {stack} in {region} at {image_id}: not in the region")
        path = self._pointer_path(stack, region)
        atomic_write(path, image_id + "\n")

    def _canary_path(self, stack: str, region: str) -> Path:
        return self.region_dir(region) / "stacks" / stack / "canary"

    def get_canary_pointer(self, stack: str, region: str) -> str | None:
        try:
            return self._canary_path(stack, region).read_text().strip() or None
        except FileNotFoundError:
            return None

    def set_canary_pointer(self, stack: str, region: str, image_id: str | None) -> None:
        path = self._canary_path(stack, region)
        if image_id is None:
            path.unlink(missing_ok=True)
            return
        if self.metadata(image_id, region) is None:
            raise CloudError(f"cannot point {stack}'s canary in {region} at {image_id}: not there")
        atomic_write(path, image_id + "\n")

    def deprecate(
        self,
        image: CloudImage,
        *,
        replacement: CloudImage | None = None,
        at: dt.datetime | None = None,
    ) -> None:
        self._update(
            image,
            state="deprecated",
            deprecated_at=(at or _now()).isoformat(),
            replacement=replacement.image_id if replacement else None,
        )

    def delete(self, image: CloudImage) -> None:
        hex_ = _hex(image.image_id)
        stacks = self.region_dir(image.region) / "stacks"
        pointers = [*stacks.glob("*/latest"), *stacks.glob("*/canary")] if stacks.is_dir() else []
        for latest in pointers:
            if latest.read_text().strip() == image.image_id:
                raise CloudError(
                    f"local image {image.image_id} is the {latest.name} of "
                    f"{latest.parent.name} in {image.region}: not deleted"
                )
        with self._region_lock(image.region):
            meta = _read_json(self._meta_path(image.region, hex_))
            if meta is None:
                return
            file = self.region_dir(image.region) / "images" / meta["file"]
            with contextlib.suppress(FileNotFoundError):
                file.unlink()
            shutil.rmtree(saved_boot.boots_folder(file), ignore_errors=True)
            self._meta_path(image.region, hex_).unlink()


def create_provider(options: LocalOptions) -> LocalProvider:
    return LocalProvider(options)
