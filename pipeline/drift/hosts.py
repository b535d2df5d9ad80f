"""Host drift: what fleet nodes really run versus what their image was built with.

Input: boot-check receipts (``/var/lib/imagectl/boot-receipt.json`` collected from each
node: a folder of ``*.json``, or the catalog's receipts). Each names its ``image_id``,
``stack`` and ``stack_digest`` and carries host facts (driver, NCCL, kernel, fabric
manager; see ``receipts.py``). The expectation is the image's manifest
(``/etc/imagectl/manifest.json``, given with ``--manifest`` or found under
``<DIR>/manifests/``) matched by image id or stack digest, else the stack's pins when the
receipt's digest is the stack's current digest. A differing fact is
``host-<field>-drift`` with the likely cause: an unattended upgrade (one package moved)
or a half-applied change (driver and fabric manager disagree). Receipts of consecutive
boots of one node (the boot unit keeps one per boot) that show the same hardware XID on
the same GPU (UUID) are ``host-xid-recurring``: a reboot did not clear it, and NVIDIA's
Xid Catalog sends such a fault to the vendor (ISOLATE_RMA).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from imagectl.core.errors import UserError
from imagectl.drift import inventory
from imagectl.drift.findings import DriftReport, Finding
from imagectl.drift.receipts import HostFacts, manifest_facts, receipt_facts
from imagectl.stacks.resolve import ResolvedStack
from imagectl.validators.catalogs import xid_catalog
from imagectl.validators.host.boot_history import previous_boot
from imagectl.validators.jsonfile import read_json
from imagectl.validators.receipt import load_receipt, parse_receipt

FIELDS = ("driver", "fabric_manager", "nccl", "kernel")


def load_json(path: Path, what: str) -> dict[str, Any]:
    doc = read_json(path, what, "Collect the file again from the node, or remove it")
    if not isinstance(doc, dict):
        raise UserError(f"{path}:1: corrupt {what}: expected a JSON object")
    return doc


def _manifests(hosts_dir: Path | None, files: tuple[Path, ...]) -> list[HostFacts]:
    paths = list(files)
    if hosts_dir is not None and (hosts_dir / "manifests").is_dir():
        paths += sorted((hosts_dir / "manifests").glob("*.json"))
    return [manifest_facts(load_json(p, "image manifest"), str(p)) for p in paths]


def _receipts(
    stacks: list[ResolvedStack], hosts_dir: Path | None, unreadable: list[tuple[str, str]]
) -> list[HostFacts]:
    if hosts_dir is None:
        out = []
        for s in stacks:
            for label, doc in inventory.catalog_receipts(s.name):
                try:
                    out.append(receipt_facts(parse_receipt(doc, where=label), label))
                except UserError as exc:  # reported like an unreadable file
                    unreadable.append((label, exc.render()))
        return out
    if not hosts_dir.is_dir():
        raise UserError(f"--hosts {hosts_dir} is not a folder of receipts")

    found = []
    for path in sorted(hosts_dir.rglob("*.json")):
        if "manifests" in path.relative_to(hosts_dir).parts:
            continue
        try:
            found.append(receipt_facts(load_receipt(path), str(path)))
        except UserError as exc:  # one bad receipt is reported; the others are still checked
            unreadable.append((str(path), exc.render()))
    return found


def expected_for(
    host: HostFacts, manifests: list[HostFacts], stacks: dict[str, ResolvedStack]
) -> HostFacts | None:
    for m in manifests:
        if m.image_id and m.image_id == host.image_id:
            return m
    for m in manifests:
        if m.stack_digest and m.stack_digest == host.stack_digest:
            return m
    resolved = stacks.get(host.stack or "")
    if resolved is not None and resolved.digest == host.stack_digest:
        pins = resolved.pins()
        cloud = resolved.stack.clouds.enabled().get(host.cloud or "")
        return HostFacts(
            label=f"stack {resolved.name} pins", image_id=host.image_id, stack=resolved.name,
            stack_digest=resolved.digest, cloud=host.cloud, driver=pins.driver,
            fabric_manager=pins.fabric_manager, nccl=pins.nccl,
            kernel=cloud.kernel if cloud else None,
        )  # fmt: skip
    return None


def cause(field: str, host: HostFacts, expected: HostFacts) -> str:
    if field == "driver":
        if expected.fabric_manager and host.fabric_manager == expected.fabric_manager:
            return (
                "half-applied change: the driver moved but the fabric manager did not; "
                "the NVSwitch fabric will not initialise"
            )
        return "unattended upgrade of the NVIDIA driver packages (are they held?)"
    if field == "fabric_manager":
        if host.driver and host.fabric_manager != host.driver:
            return "half-applied change: fabric manager and driver disagree on the host"
        return "unattended upgrade of nvidia-fabricmanager (is it held?)"
    if field == "nccl":
        return "libnccl2 upgraded outside the image (not held)"
    return (
        "kernel changed (unattended-upgrades or a reboot into another kernel): the DKMS "
        "driver module may be missing for it"
    )


def xid_recurrences(hosts_dir: Path) -> list[dict[str, Any]]:
    """Per node (hostname), each hardware XID that a receipt shares with the node's
    previous boot's receipt, on the same GPU: the catalog's recurrence rule."""
    by_node: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for path in sorted(hosts_dir.rglob("*.json")):
        if "manifests" in path.relative_to(hosts_dir).parts:
            continue
        try:  # the hostile-input-safe reader (size, depth, huge numbers)
            doc = read_json(path, "fleet boot receipt", "reported as host-receipt-unreadable")
        except UserError:
            continue  # reported as host-receipt-unreadable
        if isinstance(doc, dict) and doc.get("kind") == "imagectl.validation-receipt":
            node = str((doc.get("host") or {}).get("hostname") or path.parent.name)
            by_node.setdefault(node, []).append((str(path), doc))
    catalog = xid_catalog()
    out = []
    for node, receipts in sorted(by_node.items()):
        receipts.sort(key=lambda r: str(r[1].get("started_at") or ""))
        for i in range(1, len(receipts)):
            label, doc = receipts[i]
            boot = (doc.get("host") or {}).get("boot") or {}
            prev = previous_boot(receipts[:i], boot.get("boot_id"))
            if prev is None:
                continue
            now = previous_boot([(label, doc)], None)
            for code, uuid, device in now.incidents if now else []:
                entry = catalog.lookup("xid", code)
                if entry.recurrence_action is None or not prev.had(code, uuid, device):
                    continue
                out.append({
                    "node": node, "stack": doc.get("stack"), "code": code, "uuid": uuid,
                    "device": device, "receipt": label, "previous": prev.origin,
                    "mnemonic": entry.mnemonic, "action": entry.recurrence_action.value,
                })  # fmt: skip
    return out


def check(
    stacks: list[ResolvedStack],
    report: DriftReport,
    hosts_dir: Path | None,
    manifest_files: tuple[Path, ...] = (),
) -> None:
    by_name = {s.name: s for s in stacks}
    manifests = _manifests(hosts_dir, manifest_files)
    unreadable: list[tuple[str, str]] = []
    hosts = _receipts(stacks, hosts_dir, unreadable)
    for label, problem in unreadable:
        for s in stacks:
            report.stack(s.name).findings.append(Finding(
                "hosts", s.name, "host-receipt-unreadable", label, None, None,
                f"skipped: {problem}", severity="warning",
            ))  # fmt: skip
    for host in hosts:
        if host.stack not in by_name:
            continue
        drift = report.stack(host.stack)
        expected = expected_for(host, manifests, by_name)
        if expected is None:
            drift.findings.append(Finding(
                "hosts", host.stack, "host-unknown-image", host.label, host.image_id, None,
                "no manifest for this image and its stack digest is not the current one: "
                "pass the image's manifest with --manifest", severity="warning",
                cloud=host.cloud, extra={"host": host.host},
            ))  # fmt: skip
            continue
        for field in FIELDS:
            want = getattr(expected, field)
            have = getattr(host, field)
            if want is None or have is None or same(field, want, have):
                continue
            drift.findings.append(Finding(
                "hosts", host.stack, f"host-{field.replace('_', '-')}-drift",
                host.host or host.label, want, have, cause(field, host, expected),
                cloud=host.cloud, region=host.region,
                extra={"receipt": host.label, "image_id": host.image_id,
                       "expected_from": expected.label},
            ))  # fmt: skip

    if hosts_dir is not None:
        for r in xid_recurrences(hosts_dir):
            if r["stack"] not in by_name:
                continue
            report.stack(r["stack"]).findings.append(Finding(
                "hosts", r["stack"], "host-xid-recurring", r["node"], None,
                f"Xid {r['code']} {r['mnemonic']}",
                f"GPU {r['uuid'] or r['device']} had Xid {r['code']} in the previous boot too: "
                f"the reboot did not clear it; NVIDIA's Xid Catalog sends it to the vendor "
                f"({r['action']}: drain the node, RMA the GPU)",
                extra={"receipt": r["receipt"], "previous_receipt": r["previous"],
                       "gpu_uuid": r["uuid"], "device": r["device"]},
            ))  # fmt: skip


def same(field: str, want: str, have: str) -> bool:
    if field == "nccl":  # the host reports NCCL's own version (2.26.2), pins the package
        return want.split("-")[0] == have.split("-")[0]
    return want == have
