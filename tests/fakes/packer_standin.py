"""A stand-in for ``packer`` where Packer cannot reach the emulators: its googlecompute and
azure-arm builders take no endpoint override.

Packer 1.6.6 (Debian's, the one here) builds its Compute client with
``compute.NewService(ctx, <credentials option>)`` and nothing else, so it always calls
``https://compute.googleapis.com`` (builder/googlecompute/driver_gce.go, NewDriverGCE);
its azure-arm builder resolves ARM's endpoints from ``cloud_environment_name``, which
accepts only Public, China, German and USGovernment
(builder/azure/common/client/config.go, setCloudEnvironment), and every ARM call is
HTTPS to that cloud. (The googlecompute plugin's ``custom_endpoints`` arrived in v1.2.3
and the azure plugin has ``metadata_host``; neither can be installed here.)

So ``imagectl build --cloud gcp|azure`` runs against the fakes with this script as
``$IMAGECTL_PACKER``. It speaks Packer's command line as imagectl's wrapper uses it
(``packer version``; ``packer build -machine-readable -color=false -var-file=F DIR``:
machine-readable ``ui`` lines, the manifest post-processor's JSON at ``manifest_file``)
and makes only the builder's call that leaves the artifact behind, as the builder makes
it and under the same identity:

- googlecompute: ``images.insert`` of ``image_name`` from the build instance's boot disk,
  labelled ``image_tags``, then ``globalOperations.get`` until DONE (StepCreateImage);
- azure-arm: the gallery image version ``azure_gallery_image_version`` PUT from the
  managed image, in ``azure_location``, excluded from latest, tagged ``image_tags``, then
  its ``Azure-AsyncOperation`` until Succeeded (StepPublishToSharedImageGallery).

Every other call of the builders (the build instance, its disk and network, the managed
image) is not made: images/permissions/builders.yaml lists what they need, with sources.
A refused call ends the build as Packer does: an ``error`` line naming the cloud's
message, exit 1.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

VERSION = "Packer v1.6.6"


def say(level: str, text: str, target: str = "") -> None:
    text = text.replace(",", "%!(PACKER_COMMA)").replace("\n", "\\n")
    print(f"{int(time.time())},{target},ui,{level},{text}", flush=True)


class Refused(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


class Failed(Exception):
    pass


def call(method: str, url: str, body: Any = None) -> tuple[Any, dict[str, str]]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    req.add_header("Authorization", "Bearer packer-standin")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
            return (json.loads(raw) if raw else None), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            error = json.loads(raw).get("error", {})
        except ValueError:
            error = {"message": raw.decode(errors="replace")}
        reason = next((e.get("reason", "") for e in error.get("errors", [])), "")
        code = reason or str(error.get("code", ""))
        raise Refused(exc.code, code, str(error.get("message", ""))) from None


def gcp(v: dict[str, Any], endpoint: str) -> str:
    project, zone, name = v["gcp_project"], v["gcp_zone"], v["image_name"]
    base = f"{endpoint.rstrip('/')}/compute/v1/projects/{project}"
    body: dict[str, Any] = {
        "name": name,
        "labels": v.get("image_tags") or {},
        "sourceDisk": f"projects/{project}/zones/{zone}/disks/packer-{v['build_id']}",
    }
    if v.get("gcp_image_storage_location"):
        body["storageLocations"] = [v["gcp_image_storage_location"]]
    say("say", f"==> googlecompute.candidate: Creating image {name}...")
    try:
        op, _ = call("POST", f"{base}/global/images", body)
        while op.get("status") != "DONE":
            time.sleep(0.05)
            op, _ = call("GET", f"{base}/global/operations/{op['name']}")
    except Refused as exc:  # as the Go client library words it
        raise Failed(
            f"Error creating image: googleapi: Error {exc.status}: {exc.message}, {exc.code}"
        ) from None
    return name


def azure(v: dict[str, Any], endpoint: str) -> str:
    sub, loc = v["azure_subscription_id"], v["azure_location"]
    managed = (
        f"/subscriptions/{sub}/resourceGroups/{v['azure_build_resource_group']}"
        f"/providers/Microsoft.Compute/images/{v['image_name']}"
    )
    version = (
        f"/subscriptions/{sub}/resourceGroups/{v['azure_gallery_resource_group']}"
        f"/providers/Microsoft.Compute/galleries/{v['azure_gallery_name']}"
        f"/images/{v['azure_gallery_image_definition']}"
        f"/versions/{v['azure_gallery_image_version']}"
    )
    body = {
        "location": loc,
        "tags": v.get("image_tags") or {},
        "properties": {
            "publishingProfile": {"targetRegions": [{"name": loc}], "excludeFromLatest": True},
            "storageProfile": {"source": {"id": managed}},
        },
    }
    say("say", f"==> azure-arm.candidate: Publishing to Shared Image Gallery: {version}")
    try:
        _, headers = call("PUT", f"{endpoint.rstrip('/')}{version}?api-version=2023-07-03", body)
        poll = headers.get("Azure-AsyncOperation") or headers.get("azure-asyncoperation")
        while poll:
            status, _ = call("GET", poll)
            if status.get("status") in ("Succeeded", "Failed", "Canceled"):
                if status["status"] != "Succeeded":
                    raise Failed(f"publishing failed: {json.dumps(status.get('error', {}))}")
                break
            time.sleep(0.05)
    except Refused as exc:  # as autorest words it
        raise Failed(
            "compute.GalleryImageVersionsClient#CreateOrUpdate: Failure sending request: "
            f'StatusCode={exc.status} -- Original Error: Code="{exc.code}" '
            f'Message="{exc.message}"'
        ) from None
    return managed


BUILDERS = {
    "googlecompute": (gcp, "IMAGECTL_GCP_ENDPOINT"),
    "azure-arm": (azure, "IMAGECTL_AZURE_ENDPOINT"),
}


def build(args: list[str]) -> int:
    variables: dict[str, Any] = {}
    for arg in args:
        if arg.startswith("-var-file="):
            path = Path(arg.split("=", 1)[1])
            if path.suffix == ".json":
                variables.update(json.loads(path.read_text()))
    folder = Path(args[-1])
    source = next(
        (b for b in BUILDERS if f'source "{b}"' in (folder / "candidate.pkr.hcl").read_text()), ""
    )
    if not source:
        say("error", f"packer stand-in: no googlecompute or azure-arm source in {folder}")
        return 1
    make, env = BUILDERS[source]
    target = f"{source}.candidate"
    try:
        artifact = make(variables, os.environ[env])
    except (Failed, Refused, KeyError) as exc:
        say("error", f"Build '{target}' errored after 0 seconds: {exc}")
        return 1
    run = str(uuid.uuid4())
    manifest = {
        "builds": [
            {
                "name": "candidate",
                "builder_type": source,
                "build_time": int(time.time()),
                "files": None,
                "artifact_id": artifact,
                "packer_run_uuid": run,
                "custom_data": variables.get("image_tags") or {},
            }
        ],
        "last_run_uuid": run,
    }
    Path(variables["manifest_file"]).write_text(json.dumps(manifest, indent=2))
    say("say", f"Build '{target}' finished after 0 seconds.")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["version"] or argv[:1] == ["--version"]:
        print(VERSION)
        return 0
    if argv[:1] == ["build"]:
        return build(argv[1:])
    print(f"packer stand-in: unsupported command {argv!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
