"""Upstream drift of the local (Debian) stack: offline fixture mirror, then the real archive."""

from __future__ import annotations

import gzip
import lzma
from pathlib import Path

import pytest
from drift_helpers import edit, kinds, proposals, stack_report

DEBIAN = "http://deb.debian.org/debian"


META = "linux-image-cloud-amd64"


def stanza(package: str, version: str, depends: str = "") -> str:
    lines = [f"Package: {package}", f"Version: {version}", "Architecture: amd64"]
    if depends:
        lines.append(f"Depends: {depends}")
    lines.append(f"Description: {package}\n multi-line description, continued")
    return "\n".join(lines)


@pytest.fixture
def mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Debian mirror on disk: main (gzip), -updates (xz), -security (plain)."""
    root = tmp_path / "mirror"
    main = root / "debian/dists/bookworm/main/binary-amd64"
    updates = root / "debian/dists/bookworm-updates/main/binary-amd64"
    security = root / "debian-security/dists/bookworm-security/main/binary-amd64"
    for folder in (main, updates, security):
        folder.mkdir(parents=True)
    main_text = "\n\n".join([
        stanza(META, "6.1.158-1", "linux-image-6.1.0-41-cloud-amd64 (= 6.1.158-1)"),
        stanza("linux-image-6.1.0-41-cloud-amd64", "6.1.158-1"),
        stanza("jq", "1.6-2.1+deb12u2", "libjq1 (= 1.6-2.1+deb12u2)"),
        stanza("chrony", "4.3-2+deb12u1"),
        stanza("chrony-doc", "4.3-2+deb12u9"),
    ]) + "\n"  # fmt: skip
    (main / "Packages.gz").write_bytes(gzip.compress(main_text.encode()))
    (updates / "Packages.xz").write_bytes(
        lzma.compress((stanza("chrony", "4.3-2+deb12u3") + "\n").encode(), format=lzma.FORMAT_XZ)
    )
    (security / "Packages").write_text("\n\n".join([
        stanza(META, "6.1.192-2", "linux-image-6.1.0-56-cloud-amd64 (= 6.1.192-2)"),
        stanza("linux-image-6.1.0-56-cloud-amd64", "6.1.192-2"),
        stanza("jq", "1.6-2.1+deb12u3"),
    ]) + "\n")  # fmt: skip
    return root


def use_mirror(ws: Path, mirror: Path) -> Path:
    return edit(ws, "local", f'mirror: "{DEBIAN}"', f'mirror: "{(mirror / "debian").as_uri()}"')


def run(cli, ws: Path, *extra: str):  # type: ignore[no-untyped-def]
    return cli(
        "--root", str(ws), "drift", "--upstream", "--stack", "local", "--format", "json", *extra
    )


def test_current_pins_are_no_drift(cli, workspace_copy, mirror):
    use_mirror(workspace_copy, mirror)
    result = run(cli, workspace_copy)
    assert result.code == 0, result.out + result.err
    entry = stack_report(result, "local")
    urls = entry["checked"][0]["index"]
    assert [u.rsplit("/", 1)[1] for u in urls] == ["Packages.gz", "Packages.xz", "Packages"]
    assert "bookworm-security" in urls[2]


def test_older_pins_are_reported_and_written(cli, workspace_copy, mirror):
    path = use_mirror(workspace_copy, mirror)
    edit(workspace_copy, "local", '"6.1.0-56-cloud-amd64"', '"6.1.0-41-cloud-amd64"')
    edit(workspace_copy, "local", '"1.6-2.1+deb12u3"', '"1.6-2.1+deb12u2"')
    edit(workspace_copy, "local", '"4.3-2+deb12u3"', '"4.3-2+deb12u1"')
    result = run(cli, workspace_copy, "--write")
    assert result.code == 1
    entry = stack_report(result, "local")
    found = {(f["kind"], f["subject"]): f for f in entry["findings"]}
    assert found[("kernel-newer", "kernel")]["available"] == "6.1.0-56-cloud-amd64"
    assert found[("package-newer", "jq")]["available"] == "1.6-2.1+deb12u3"  # security
    assert found[("package-newer", "chrony")]["available"] == "4.3-2+deb12u3"  # updates
    text = path.read_text()
    assert 'kernel: "6.1.0-56-cloud-amd64"' in text
    assert 'jq: "1.6-2.1+deb12u3"' in text and 'chrony: "4.3-2+deb12u3"' in text
    assert text.startswith("# yaml-language-server: $schema=")  # comments kept, in order
    assert text.splitlines()[1].startswith("# The local stack: a Debian 12 QEMU VM")
    assert run(cli, workspace_copy).code == 0  # nothing left to propose


def test_pin_no_longer_in_the_archive(cli, workspace_copy, mirror):
    use_mirror(workspace_copy, mirror)
    edit(workspace_copy, "local", '"4.3-2+deb12u3"', '"4.3-2+deb12u2"')
    result = run(cli, workspace_copy)
    assert result.code == 1
    found = {(f["kind"], f["subject"]): f for f in stack_report(result, "local")["findings"]}
    assert found[("pin-unavailable", "chrony")]["current"] == "4.3-2+deb12u2"
    assert ("package-newer", "chrony") in found


def test_real_debian_archive(cli, workspace_copy, reachable):
    """The local stack against the Debian archive itself (network; CI must reach it)."""
    reachable(f"{DEBIAN}/dists/bookworm/InRelease")
    path = workspace_copy / "images" / "stacks" / "local.yaml"
    # pin versions that are certainly older than what the archive serves
    edit(workspace_copy, "local", '"6.1.0-56-cloud-amd64"', '"6.1.0-9-cloud-amd64"')
    edit(workspace_copy, "local", '"1.6-2.1+deb12u3"', '"1.6-2.1"')
    result = run(cli, workspace_copy, "--write")
    assert result.code == 1, result.err
    entry = stack_report(result, "local")
    assert len(entry["checked"][0]["index"]) == 3
    checked = {c.get("subject"): c for c in entry["checked"]}
    found = {(f["kind"], f["subject"]): f for f in entry["findings"]}
    latest_kernel = checked["kernel"]["latest"]
    assert latest_kernel and latest_kernel.endswith("-cloud-amd64")
    assert found[("kernel-newer", "kernel")]["available"] == latest_kernel
    jq = checked["jq"]["latest"]
    assert jq.startswith("1.6-2.1+deb12u")  # bookworm's jq with its security updates
    assert found[("package-newer", "jq")]["available"] == jq
    assert proposals(entry)["clouds.local.kernel"]["writable"] is True
    text = path.read_text()
    assert f'kernel: "{latest_kernel}"' in text and f'jq: "{jq}"' in text
    lint = cli("--root", str(workspace_copy), "lint", "--stack", "local", "--json")
    assert not [p for p in lint.json()["stacks"][0]["problems"] if p["rule"] == "SCHEMA"]
    again = run(cli, workspace_copy)
    assert not {k for k, _ in kinds(stack_report(again, "local")).items()} & {
        "kernel-newer",
        "package-newer",
    }
