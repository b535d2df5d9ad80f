"""Sandbox receipts: try-it replays (``validate-image --sandbox``) and where they count.

A sandbox receipt is a replay of a recorded snapshot made with the explicit ``--sandbox``
switch (``mode: replay``, ``sandbox: true``). It proves nothing about an image's hardware:
it stands only for an emulated cloud (``imagectl.clouds.account.real_cloud``, the one test
the preflight, ``validate-image --sandbox``, the promotion gate and the attestation use).
For an image whose cloud is a real endpoint here, each such receipt is a reason, wherever
and whenever it was made.
"""

from __future__ import annotations

from imagectl.catalog.models import Image, ValidationRun
from imagectl.clouds.account import endpoint_env, real_cloud
from imagectl.validators.receipt import Receipt


def sandboxed(receipt: Receipt) -> bool:
    return receipt.mode == "replay" and receipt.sandbox


def sandbox_on_real_cloud(image: Image, runs: list[ValidationRun]) -> list[str]:
    """A reason for each sandbox replay among ``runs`` when ``image``'s cloud is a real
    endpoint here (a receipt recorded elsewhere, or before this check existed, included)."""
    if not real_cloud(image.cloud):
        return []
    return [
        f"{run.where} is a sandbox replay (validate-image --sandbox) of a recorded snapshot "
        f"({run.body.snapshot or 'unnamed'}), which stands only for an emulated cloud, and "
        f"{image.cloud} is a real cloud endpoint here (${endpoint_env(image.cloud)} names no "
        "emulator on this machine): validate on hosts booted from the image"
        for run in runs
        if sandboxed(run.body)
    ]
