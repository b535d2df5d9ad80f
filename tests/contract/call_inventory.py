"""Every cloud SDK call the code can make, found in its source, and what the inventory
(``images/permissions/calls/<cloud>.yaml``) says each needs.

The scan reads ``pipeline/clouds/<cloud>/`` (its ``doctor.py`` too) and
``pipeline/clouds/reap.py`` with ``ast`` and names each call site by file, enclosing
function and SDK method, whatever path reaches it (success, failure, retry or option).
What counts as an SDK call is taken from the SDKs themselves, not typed here:

- **AWS**: a method whose name is an operation of a boto3 client of a service imagectl
  uses (botocore's service models, ``xform_name``), on any receiver but ``self``/``cls``
  or one of imagectl's own modules; ``get_paginator("op")`` and ``get_waiter("w")``
  count as the operation they call.
- **Google Cloud**: a method of a ``compute_v1`` client class, on one of ``GcpClients``'
  client properties (``clients.images`` -> ``ImagesClient``), and the doctor's
  ``AuthorizedSession`` requests.
- **Azure**: a method of an operation group of ``ComputeManagementClient`` /
  ``NetworkManagementClient`` (``compute.gallery_images.get``), on that group's attribute
  or a name the inventory declares an alias of it, and ``send_request``.

The check (``problems``) holds each role's document to the calls its commands reach:
every permission of every reachable call granted, and nothing granted that no call (or,
for ``build``, Packer's builder: ``builders.yaml``) needs.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import inspect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.fakes import permissions as perm

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = ROOT / "images" / "permissions" / "calls"
CLOUDS = ("aws", "gcp", "azure")
AWS_SERVICES = ("ec2", "ssm", "iam", "sts", "kms", "service-quotas")
HTTP_METHODS = {"get", "post", "put", "patch", "delete", "request"}


@dataclass(frozen=True)
class Site:
    file: str  # relative to the repository
    function: str  # Class.method or function (outermost def)
    call: str  # the SDK method as the scan names it (``copy_image``, ``images.insert``)
    line: int

    @property
    def at(self) -> str:
        return f"{self.file}:{self.function}"


def files(cloud: str) -> list[Path]:
    found = sorted((ROOT / "pipeline" / "clouds" / cloud).glob("*.py"))
    found += [ROOT / "pipeline/clouds/reap.py"]  # its doctor.py is in its folder
    # sandbox*.py: the docs sandbox's emulator (moto seeding), not imagectl's calls
    return [f for f in found if not f.name.startswith("sandbox")]


@functools.cache
def aws_operations() -> dict[str, tuple[str, ...]]:
    import botocore.session
    from botocore import xform_name

    session = botocore.session.get_session()
    ops: dict[str, list[str]] = {}
    for service in AWS_SERVICES:
        for name in session.get_service_model(service).operation_names:
            ops.setdefault(xform_name(name), []).append(service)
    return {k: tuple(v) for k, v in ops.items()}


@functools.cache
def aws_waiters() -> dict[str, str]:
    import boto3

    out: dict[str, str] = {}
    for service in AWS_SERVICES:
        client = boto3.client(service, region_name="us-east-1", aws_access_key_id="x",
                              aws_secret_access_key="x")  # fmt: skip
        for waiter in client.waiter_names:
            from botocore import xform_name

            out[waiter] = xform_name(client.get_waiter(waiter).config.operation)
    return out


@functools.cache
def gcp_clients() -> dict[str, set[str]]:
    """``GcpClients`` property -> the public methods of the compute_v1 client it makes."""
    from imagectl.clouds.gcp import compute_sdk
    from imagectl.clouds.gcp.clients import GcpClients

    compute_v1 = compute_sdk.compute_v1()
    out: dict[str, set[str]] = {}
    for name, member in vars(GcpClients).items():
        if isinstance(member, property) and member.fget is not None:
            m = re.search(r'_make\("(\w+)"\)', inspect.getsource(member.fget))
            if m:
                cls = getattr(compute_v1, m[1])
                out[name] = {a for a in dir(cls) if not a.startswith("_")}
    # the operations clients GcpClients.wait builds by kind (Zone/Region/GlobalOperations)
    out["operations"] = {a for a in dir(compute_v1.GlobalOperationsClient)
                         if not a.startswith("_")}  # fmt: skip
    return out


@functools.cache
def azure_groups() -> dict[str, set[str]]:
    """Operation group attribute -> its public methods (compute and network clients)."""
    from azure.mgmt.compute import ComputeManagementClient
    from azure.mgmt.network import NetworkManagementClient

    out: dict[str, set[str]] = {}
    for client in (ComputeManagementClient, NetworkManagementClient):
        source = inspect.getsource(client.__init__)
        module = inspect.getmodule(client)
        for attr, cls_name in re.findall(r"self\.(\w+) = (\w+Operations)\(", source):
            cls = getattr(module, cls_name, None)
            if cls is None:
                continue
            out.setdefault(attr, set()).update(a for a in dir(cls) if not a.startswith("_"))
    return out


def _own_modules(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("imagectl"):
            names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.asname or a.name.split(".")[0] for a in node.names)
    return names


def _last(node: ast.expr) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def _functions(tree: ast.Module) -> list[tuple[str, ast.AST]]:
    out: list[tuple[str, ast.AST]] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            out.append((node.name, node))
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    out.append((f"{node.name}.{item.name}", item))
    return out


def scan(cloud: str, aliases: dict[str, str] | None = None) -> list[Site]:
    """Every SDK call site of ``cloud``'s code."""
    aliases = aliases or {}
    sites: list[Site] = []
    for path in files(cloud):
        tree = ast.parse(path.read_text())
        own = _own_modules(tree)
        rel = str(path.relative_to(ROOT))
        for qualname, fn in _functions(tree):
            for node in ast.walk(fn):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                    continue
                name = _sdk_call(cloud, node, own, aliases)
                if name:
                    sites.append(Site(rel, qualname, name, node.lineno))
    return sites


def _sdk_call(cloud: str, node: ast.Call, own: set[str], aliases: dict[str, str]) -> str | None:
    assert isinstance(node.func, ast.Attribute)
    method, receiver = node.func.attr, node.func.value
    last = _last(receiver)
    if cloud == "aws":
        if isinstance(receiver, ast.Name) and receiver.id in ({"self", "cls"} | own):
            return None
        arg = node.args[0] if node.args else None
        literal = arg.value if isinstance(arg, ast.Constant) else None
        if method == "get_paginator" and isinstance(literal, str):
            return literal
        if method == "get_waiter" and isinstance(literal, str):
            return aws_waiters()[literal]
        return method if method in aws_operations() else None
    if cloud == "gcp":
        made = _last(receiver.func) if isinstance(receiver, ast.Call) else None
        is_session = last == "session" or made in ("_session", "AuthorizedSession")
        if is_session and method in HTTP_METHODS:  # Resource Manager over AuthorizedSession
            return f"session.{method}"
        group = aliases.get(last or "", last)
        if group in gcp_clients() and method in gcp_clients()[group]:
            return f"{group}.{method}"
        return None
    if method == "send_request":
        return "send_request"
    if aliases.get(last or "") == "*":  # a name bound to several groups in turn
        if any(method in methods for methods in azure_groups().values()):
            return f"{last}.{method}"
        return None
    group = aliases.get(last or "", last)
    if group in azure_groups() and method in azure_groups()[group]:
        return f"{group}.{method}"
    return None


# -- the inventory ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    call: str  # the API method, as its reference names it
    scan: str  # the SDK method the scan names
    permissions: tuple[str, ...]
    source: str
    at: str  # file:function
    roles: tuple[str, ...]
    path: str  # success | failure | retry | option
    reached: str


@functools.cache
def _load(path: Path) -> Any:
    from ruamel.yaml import YAML

    return YAML(typ="safe").load(path.read_text())


def inventory(cloud: str) -> tuple[list[Entry], dict[str, Any]]:
    data = _load(INVENTORY / f"{cloud}.yaml")
    entries: list[Entry] = []
    for call in data["calls"]:
        for site in call["sites"]:
            entries.append(Entry(
                call=call["call"], scan=call["scan"],
                permissions=tuple(call.get("permissions") or ()) + tuple(
                    site.get("also") or ()),
                source=call["source"], at=site["at"], roles=tuple(site["roles"]),
                path=site.get("path", "success"), reached=site.get("reached", ""),
            ))  # fmt: skip
    return entries, data


def _grants(patterns: list[str], permission: str) -> bool:
    return any(fnmatch.fnmatch(permission.lower(), p.lower()) for p in patterns)


def builder_needs(cloud: str) -> list[str]:
    return list(_load(ROOT / "images/permissions/builders.yaml")[cloud]["permissions"])


def off_the_happy_path(cloud: str, role: str) -> set[str]:
    """What ``role``'s document grants only for calls a failure, a retry or an option
    reaches: a run on the emulators that makes none of those leaves them unused."""
    entries, _ = inventory(cloud)
    happy = {p for e in entries if role in e.roles and e.path == "success" for p in e.permissions}
    if role == "build":
        happy |= set(builder_needs(cloud))
    other = {p for e in entries if role in e.roles and e.path != "success" for p in e.permissions}
    return {g for g in perm.granted(cloud, perm.load_document(cloud, role))
            if any(fnmatch.fnmatch(p.lower(), g.lower()) for p in other - happy)}  # fmt: skip


def problems(cloud: str, documents: dict[str, Any] | None = None) -> list[str]:
    """What is wrong between the inventory and the role documents (``documents``: role ->
    parsed document, the shipped ones by default): a reachable call's permission that its
    role's document lacks, naming the call, its site and the document; and a document's
    grant that no call of that role needs."""
    entries, data = inventory(cloud)
    roles = sorted({r for e in entries for r in e.roles} | set(data.get("roles_checked", [])))
    docs = documents or {role: perm.load_document(cloud, role) for role in roles}
    out: list[str] = []
    for e in entries:
        for role in e.roles:
            grants = perm.granted(cloud, docs[role])
            name = perm.document_path(cloud, role).relative_to(ROOT)
            for p in e.permissions:
                if not _grants(grants, p):
                    out.append(f"{name} does not grant {p}, which {e.call} ({e.scan} at "
                               f"{e.at}, {e.path}: {e.reached}) needs")  # fmt: skip
    if "build" in roles:  # what Packer's builder itself asks (builders.yaml, with sources)
        grants = perm.granted(cloud, docs["build"])
        name = perm.document_path(cloud, "build").relative_to(ROOT)
        for p in builder_needs(cloud):
            if not _grants(grants, p):
                out.append(f"{name} does not grant {p}, which Packer's {cloud} builder "
                           "(images/permissions/builders.yaml) needs")  # fmt: skip
    for role in roles:
        needed = [p for e in entries if role in e.roles for p in e.permissions]
        if role == "build":
            needed += builder_needs(cloud)
        name = perm.document_path(cloud, role).relative_to(ROOT)
        for granted in perm.granted(cloud, docs[role]):
            if not any(fnmatch.fnmatch(p.lower(), granted.lower()) for p in needed):
                out.append(f"{name} grants {granted}, which no call of role {role} needs")
    return out
