"""imagectl.clouds.gcp.compute_sdk: google-cloud-compute's compute_v1 loaded name by name
gives exactly the package's own objects, for every client the package exports, and the
rest of the package on demand. Each check runs in a fresh interpreter (the package must
not be imported before)."""

from __future__ import annotations

import json
import subprocess
import sys

LEAN = """
import json, sys
from imagectl.clouds.gcp.compute_sdk import compute_v1
cv1 = compute_v1()
images, image, op = cv1.ImagesClient, cv1.Image, cv1.Operation.Status.DONE
from google.cloud import compute_v1 as imported
loaded = sorted(m for m in sys.modules if m.startswith("google.cloud.compute_v1.services."))
out = {"same": imported is cv1, "services": sorted({m.split(".")[4] for m in loaded}),
       "image": f"{image.__module__}.{image.__qualname__}", "op": op.name}
version = cv1.__version__  # not a client or a type: the package's own __init__ runs
out["version"] = version
out["all_loaded"] = "google.cloud.compute_v1.services.zone_operations" in sys.modules
print(json.dumps(out))
"""

EVERY_CLIENT = """
import json
from imagectl.clouds.gcp.compute_sdk import compute_v1
cv1 = compute_v1()
names = %s
lean = {n: f"{getattr(cv1, n).__module__}.{getattr(cv1, n).__qualname__}" for n in names}
loaded = "google.cloud.compute_v1.services.zone_operations" in __import__("sys").modules
print(json.dumps({"lean": lean, "loaded_by_a_client": loaded}))
"""

FULL = """
import json
from google.cloud import compute_v1
names = [n for n in compute_v1.__all__ if n.endswith("Client")]
print(json.dumps({n: f"{getattr(compute_v1, n).__module__}.{getattr(compute_v1, n).__qualname__}"
                  for n in names}))
"""


def _run(code: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)  # fmt: skip
    return json.loads(proc.stdout)


def test_imagectl_loads_only_the_clients_it_uses() -> None:
    got = _run(LEAN)
    assert got["same"] is True  # `from google.cloud import compute_v1` finds the same package
    # images and what it imports itself (its operations' client), not the ~100 clients the
    # package's __init__ imports
    assert "images" in got["services"] and len(got["services"]) <= 3, got["services"]
    assert got["image"] == "google.cloud.compute_v1.types.compute.Image"
    assert got["op"] == "DONE"
    assert got["version"] and got["all_loaded"] is True  # any other name: the whole package


def test_every_client_of_the_package_resolves_to_the_packages_own_class() -> None:
    full = _run(FULL)
    assert len(full) > 80, sorted(full)
    got = _run(EVERY_CLIENT % json.dumps(sorted(full)))
    assert got["lean"] == full
    assert got["loaded_by_a_client"] is True  # ZoneOperationsClient was asked for
