"""A private apt world (APT_CONFIG) with a flat file:// repository of dummy packages.

The NVIDIA repository is not reachable here, so its packages are stood in for by
empty .debs (dpkg-deb) with the real names and versions, plus a newer decoy of each
(what a careless ``apt-get install`` would pick). The real apt resolves against it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path


def _deb(pool: Path, name: str, version: str) -> None:
    safe = version.replace(":", "%3a")
    folder = pool / f"{name}_{safe}"
    (folder / "DEBIAN").mkdir(parents=True)
    (folder / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: all\n"
        "Maintainer: imagectl tests <tests@imagectl.invalid>\n"
        f"Description: stand-in for {name}\n"
    )
    subprocess.run(
        ["dpkg-deb", "--build", "-Zgzip", str(folder), str(pool / f"{name}_{safe}_all.deb")],
        check=True,
        capture_output=True,
    )


def make_sandbox(base: Path, packages: dict[str, list[str]]) -> dict[str, str]:
    """Build the repo and apt config; return the environment that selects it."""
    repo = base / "repo"
    repo.mkdir(parents=True)
    for name, versions in packages.items():
        for version in versions:
            _deb(repo, name, version)
    index = subprocess.run(
        ["dpkg-scanpackages", "--multiversion", "."],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (repo / "Packages").write_text(index)
    for d in (
        "state/lists/partial",
        "cache/archives/partial",
        "etc/preferences.d",
        "etc/sources.list.d",
    ):
        (base / d).mkdir(parents=True, exist_ok=True)
    (base / "status").write_text("")
    (base / "etc/sources.list").write_text(f"deb [trusted=yes] file://{repo} ./\n")
    conf = base / "apt.conf"
    conf.write_text(
        f'Dir::State "{base}/state";\n'
        f'Dir::State::status "{base}/status";\n'
        f'Dir::Cache "{base}/cache";\n'
        f'Dir::Etc::SourceList "{base}/etc/sources.list";\n'
        f'Dir::Etc::SourceParts "{base}/etc/sources.list.d";\n'
        f'Dir::Etc::Preferences "{base}/etc/preferences";\n'
        f'Dir::Etc::PreferencesParts "{base}/etc/preferences.d";\n'
        'APT::Get::List-Cleanup "false";\n'
    )
    env = {"APT_CONFIG": str(conf)}
    subprocess.run(["apt-get", "update", "-qq"], env=env, check=True, capture_output=True)
    return env
