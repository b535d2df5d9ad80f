"""The validator's cloud hints are data (validators/data/clouds.yaml):
which DMI vendor is which cloud, how its instance metadata names the booted image, and
where its CLI keeps credentials. One entry per registered cloud, no cloud name in the
code that reads them; the generic reader is driven here against protocol-level
metadata servers (IMDSv2's PUT token and header, Azure's ImageReference JSON, Google's
Metadata-Flavor header) on a local port."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from imagectl.clouds.local.guest_setup import FW_CFG_IMAGE_ID_NAME
from imagectl.clouds.registry import BUILTIN, cloud_names
from imagectl.validators.host import metadata
from imagectl.validators.host.clouds import Metadata, cloud_hints, credential_files
from tests.clouds.test_no_cloud_branches import cloud_branches

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "AQAEAF-token"


def test_one_entry_per_registered_cloud_each_with_its_source() -> None:
    clouds = cloud_hints().clouds
    assert tuple(clouds) == tuple(BUILTIN)  # the clouds shipped with imagectl
    for name, hints in clouds.items():
        assert hints.metadata.source and "image_id" in hints.metadata.fields, name
        assert not hints.credential_files or hints.credentials_source, name
    local = clouds["local"].metadata.fields["image_id"].file
    assert local == f"/sys/firmware/qemu_fw_cfg/by_name/{FW_CFG_IMAGE_ID_NAME}/raw"
    assert ".aws/credentials" in credential_files() and ".netrc" in credential_files()


def test_the_code_that_reads_them_names_no_cloud() -> None:
    paths = [*(ROOT / "validators" / "host").glob("*.py"), ROOT / "validators/checks/hygiene.py"]
    found = {str(p): cloud_branches(p.read_text()) for p in paths}
    assert not {p: f for p, f in found.items() if f}
    for p in paths:  # nor a cloud's name as a value
        assert not any(f'"{c}"' in p.read_text() for c in cloud_names()), p


class _Imds(BaseHTTPRequestHandler):
    """IMDS as the three clouds document it, on one port: AWS IMDSv2 answers a PUT with
    a session token and a GET only with it; Google's server only with Metadata-Flavor;
    Azure's with Metadata: true."""

    def do_PUT(self) -> None:
        ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
        self._answer(200 if self.path == "/latest/api/token" and ttl else 400, TOKEN)

    def do_GET(self) -> None:
        if self.path.startswith("/latest/meta-data/"):
            ok = self.headers.get("X-aws-ec2-metadata-token") == TOKEN
            body = {"ami-id": "ami-0abc\n", "placement/region": "us-east-1",
                    "instance-id": "i-0abc123"}  # fmt: skip
            self._answer(200 if ok else 401, body.get(self.path[len("/latest/meta-data/") :], ""))
        elif self.path.startswith("/computeMetadata/"):
            ok = self.headers.get("Metadata-Flavor") == "Google"
            image = "projects/p/global/images/imagectl-1"
            self._answer(200 if ok else 403, "4520031799277581759" if self.path.endswith(
                "/instance/id") else image)  # fmt: skip
        elif self.path.startswith("/metadata/instance/compute/vmId"):
            ok = self.headers.get("Metadata") == "true" and "format=text" in self.path
            self._answer(200 if ok else 400, "02aab8a4-74ef-476e-8182-f6d2ba4166a6")
        elif self.path.startswith("/metadata/instance/compute/storageProfile/imageReference"):
            ref = {"id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/"
                   "galleries/g/images/h100", "exactVersion": "2026.1128.1"}  # fmt: skip
            self._answer(200 if self.headers.get("Metadata") == "true" else 400, json.dumps(ref))
        else:
            self._answer(404, "")

    def _answer(self, code: int, body: str) -> None:
        self.send_response(code)
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def imds() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Imds)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _at(meta: Metadata, base: str) -> Metadata:
    """The cloud's metadata entry with its hosts pointed at the local server."""

    def moved(url: str) -> str:
        return f"{base}/{url.split('/', 3)[3]}" if url else url

    token = meta.token.model_copy(update={"url": moved(meta.token.url)}) if meta.token else None
    fields = {k: f.model_copy(update={"url": moved(f.url)}) for k, f in meta.fields.items()}
    return meta.model_copy(update={"token": token, "fields": fields})


@pytest.mark.parametrize(
    ("cloud", "want"),
    [
        ("aws", {"image_id": "ami-0abc", "region": "us-east-1", "instance_id": "i-0abc123"}),
        ("gcp", {"image_id": "projects/p/global/images/imagectl-1",
                 "instance_id": "4520031799277581759"}),
        ("azure", {"image_id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/"
                   "galleries/g/images/h100/versions/2026.1128.1",
                   "instance_id": "02aab8a4-74ef-476e-8182-f6d2ba4166a6"}),
    ],
)  # fmt: skip
def test_each_clouds_metadata_read_as_its_service_answers(imds: str, cloud: str, want) -> None:
    assert metadata._read(_at(cloud_hints().clouds[cloud].metadata, imds)) == want


def test_a_field_file_that_is_absent_is_not_that_cloud(tmp_path: Path) -> None:
    meta = cloud_hints().clouds["local"].metadata
    gone = meta.model_copy(
        update={"fields": {"image_id": meta.fields["image_id"].model_copy(
            update={"file": str(tmp_path / "raw")})}}
    )  # fmt: skip
    assert metadata._read(gone) is None
    (tmp_path / "raw").write_text("sha256:abc\n")
    assert metadata._read(gone) == {"image_id": "sha256:abc"}


def test_a_vendor_no_cloud_names_asks_nothing() -> None:
    assert metadata.cloud_image_id("Dell Inc.\n") == {"cloud": None, "image_id": None}
