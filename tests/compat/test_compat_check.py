"""`imagectl compat check`: every rule of the compatibility reference, valid and invalid."""

from __future__ import annotations

from pathlib import Path

import pytest

from imagectl.compat.data import load_compat

REPO = Path(__file__).resolve().parents[2]
TODAY = "2026-11-22"
BEFORE_570_EOL = "2025-06-01"

# (rule id, arguments, whether the rule must fire). Each rule appears at least once
# each way; `test_every_rule_is_covered` enforces it.
CASES = [
    (
        "CUDA-DRIVER-MIN",
        ["--driver", "570.124.06", "--cuda", "12.9", "--as-of", BEFORE_570_EOL],
        True,
    ),
    (
        "CUDA-DRIVER-MIN",
        ["--driver", "570.124.06", "--cuda", "12.8.1", "--as-of", BEFORE_570_EOL],
        False,
    ),
    ("CUDA-DRIVER-MIN", ["--driver", "570.26", "--cuda", "12.8", "--as-of", BEFORE_570_EOL], False),
    ("CUDA-DRIVER-MIN", ["--driver", "580.82.07", "--cuda", "13.0.2"], True),
    ("CUDA-DRIVER-MIN", ["--driver", "580.95.05", "--cuda", "13.0.2"], False),
    (
        "FM-EQUALS-DRIVER",
        [
            "--driver",
            "580.95.05",
            "--cuda",
            "12.8.1",
            "--fabric-manager",
            "580.82.07",
            "--gpu",
            "H100-SXM-80GB",
        ],
        True,
    ),
    (
        "FM-EQUALS-DRIVER",
        [
            "--driver",
            "580.95.05",
            "--cuda",
            "12.8.1",
            "--fabric-manager",
            "580.95.5",
            "--gpu",
            "H100-SXM-80GB",
        ],
        True,
    ),
    (
        "FM-EQUALS-DRIVER",
        [
            "--driver",
            "580.95.05",
            "--cuda",
            "12.8.1",
            "--fabric-manager",
            "580.95.05",
            "--gpu",
            "H100-SXM-80GB",
        ],
        False,
    ),
    (
        "FM-UNNEEDED",
        [
            "--driver",
            "580.95.05",
            "--cuda",
            "12.8.1",
            "--fabric-manager",
            "580.95.05",
            "--gpu",
            "L4",
        ],
        True,
    ),
    ("FM-UNNEEDED", ["--driver", "580.95.05", "--cuda", "12.8.1", "--gpu", "L4"], False),
    (
        "MODULES-OPEN-MIN-BRANCH",
        ["--driver", "510.108.03", "--cuda", "11.7.0", "--kernel-modules", "open"],
        True,
    ),
    (
        "MODULES-OPEN-MIN-BRANCH",
        ["--driver", "515.65.01", "--cuda", "11.7.1", "--kernel-modules", "open"],
        False,
    ),
    (
        "MODULES-ARCH",
        [
            "--driver",
            "580.95.05",
            "--cuda",
            "13.0",
            "--gpu",
            "B200",
            "--kernel-modules",
            "proprietary",
        ],
        True,
    ),
    (
        "MODULES-ARCH",
        [
            "--driver",
            "580.95.05",
            "--cuda",
            "12.8",
            "--gpu",
            "V100-SXM2-32GB",
            "--kernel-modules",
            "open",
        ],
        True,
    ),
    (
        "MODULES-ARCH",
        ["--driver", "580.95.05", "--cuda", "13.0", "--gpu", "B200", "--kernel-modules", "open"],
        False,
    ),
    (
        "MODULES-ARCH",
        [
            "--driver",
            "580.95.05",
            "--cuda",
            "12.8",
            "--gpu",
            "H100-SXM-80GB",
            "--kernel-modules",
            "proprietary",
        ],
        False,
    ),
    (
        "GPU-MIN-BRANCH",
        [
            "--driver",
            "535.104.05",
            "--cuda",
            "12.2.2",
            "--gpu",
            "H200-SXM-141GB",
            "--as-of",
            "2025-01-01",
        ],
        True,
    ),
    (
        "GPU-MIN-BRANCH",
        [
            "--driver",
            "550.54.15",
            "--cuda",
            "12.4.1",
            "--gpu",
            "H200-SXM-141GB",
            "--as-of",
            "2024-06-01",
        ],
        False,
    ),
    (
        "GPU-MIN-BRANCH",
        ["--driver", "565.57.01", "--cuda", "12.6", "--gpu", "B200", "--as-of", "2025-01-01"],
        True,
    ),
    (
        "NCCL-CUDA-MAJOR",
        ["--driver", "580.95.05", "--cuda", "12.8.1", "--nccl", "2.28.3-1+cuda13.0"],
        True,
    ),
    (
        "NCCL-CUDA-MAJOR",
        ["--driver", "580.95.05", "--cuda", "13.0.2", "--nccl", "2.28.3-1+cuda13.0"],
        False,
    ),
    (
        "NCCL-CUDA-MAJOR",
        ["--driver", "580.95.05", "--cuda", "12.8.1", "--nccl", "2.27.5-1+cuda12.9"],
        False,
    ),
    (
        "CUDA-ARCH-DROPPED",
        ["--driver", "580.95.05", "--cuda", "13.0.2", "--gpu", "V100-SXM2-32GB"],
        True,
    ),
    (
        "CUDA-ARCH-DROPPED",
        ["--driver", "580.95.05", "--cuda", "12.9.1", "--gpu", "V100-SXM2-32GB"],
        False,
    ),
    ("BRANCH-EOL", ["--driver", "535.261.03", "--cuda", "12.2", "--as-of", TODAY], True),
    ("BRANCH-EOL", ["--driver", "570.172.08", "--cuda", "12.8.1", "--as-of", TODAY], True),
    ("BRANCH-EOL", ["--driver", "535.261.03", "--cuda", "12.2", "--as-of", "2026-06-30"], False),
    (
        "BRANCH-EOL-SOON",
        ["--driver", "535.261.03", "--cuda", "12.2", "--as-of", "2026-05-01"],
        True,
    ),
    (
        "BRANCH-EOL-SOON",
        ["--driver", "535.261.03", "--cuda", "12.2", "--as-of", "2026-01-01"],
        False,
    ),
    ("BRANCH-EOL-SOON", ["--driver", "535.261.03", "--cuda", "12.2", "--as-of", TODAY], False),
    ("BRANCH-UNKNOWN", ["--driver", "999.10.01", "--cuda", "13.2.2"], True),
    # The validator's toolkit (images/compat/toolkits.yaml): torch 2.9 publishes cu126, cu128
    # and cu130 (PyTorch RELEASE.md); its cu128 wheels bundle the CUDA 12.8.1 runtime
    # (nvidia-cuda-runtime-cu12==12.8.90), which Table 3 puts at driver >= 570.124.06.
    (
        "TOOLKIT-VARIANT-KNOWN",
        ["--driver", "580.95.05", "--cuda", "12.9.1", "--toolkit", "2.9.1+cu129"],
        True,
    ),
    (
        "TOOLKIT-VARIANT-KNOWN",
        ["--driver", "580.95.05", "--cuda", "12.9.1", "--toolkit", "2.8.0+cu129"],
        False,
    ),
    (
        "TOOLKIT-CUDA-DRIVER",
        [
            "--driver",
            "570.86.15",
            "--cuda",
            "12.8.0",
            "--toolkit",
            "2.9.1+cu128",
            "--as-of",
            BEFORE_570_EOL,
        ],
        True,
    ),
    (
        "TOOLKIT-CUDA-DRIVER",
        [
            "--driver",
            "570.124.06",
            "--cuda",
            "12.8.1",
            "--toolkit",
            "2.9.1+cu128",
            "--as-of",
            BEFORE_570_EOL,
        ],
        False,
    ),
    (
        "TOOLKIT-CUDA-DRIVER",
        ["--driver", "580.65.06", "--cuda", "13.0.0", "--toolkit", "2.9.1+cu130"],
        False,
    ),
    (
        "TOOLKIT-CUDA-MAJOR",
        ["--driver", "580.95.05", "--cuda", "13.0.2", "--toolkit", "2.9.1+cu128"],
        True,
    ),
    (
        "TOOLKIT-CUDA-MAJOR",
        ["--driver", "580.95.05", "--cuda", "13.0.2", "--toolkit", "2.9.1+cu130"],
        False,
    ),
    (
        "TOOLKIT-MISSING",
        [
            "--driver",
            "580.95.05",
            "--cuda",
            "12.8.1",
            "--gpu",
            "H100-SXM-80GB",
            "--profile",
            "quick",
        ],
        True,
    ),
    (
        "TOOLKIT-MISSING",
        [
            "--driver",
            "580.95.05",
            "--cuda",
            "12.8.1",
            "--gpu",
            "H100-SXM-80GB",
            "--profile",
            "boot",
        ],
        False,
    ),
    (
        "TOOLKIT-MISSING",
        [
            "--driver",
            "580.95.05",
            "--cuda",
            "12.8.1",
            "--gpu",
            "H100-SXM-80GB",
            "--profile",
            "quick",
            "--toolkit",
            "2.9.1+cu128",
        ],
        False,
    ),
    ("BRANCH-UNKNOWN", ["--driver", "580.95.05", "--cuda", "13.2.2", "--as-of", TODAY], False),
]


# Trusted Launch's Secure Boot vs the DKMS-built modules every driver source installs
# (Microsoft Learn, "Trusted launch for Azure virtual machines"; Ubuntu UEFI/SecureBoot/DKMS)
_H100 = ["--driver", "580.95.05", "--cuda", "12.8.1", "--gpu", "H100-SXM-80GB"]
CASES += [
    ("AZURE-SECURE-BOOT-DKMS", [*_H100, "--azure-security-type", "TrustedLaunch"], True),
    ("AZURE-SECURE-BOOT-DKMS", [*_H100, "--azure-security-type", "Standard"], False),
    ("AZURE-SECURE-BOOT-DKMS", [*_H100, "--azure-security-type", "TrustedLaunchSupported"], False),
    (
        "AZURE-SECURE-BOOT-OPTIONAL",
        [*_H100, "--azure-security-type", "TrustedLaunchSupported"],
        True,
    ),
    ("AZURE-SECURE-BOOT-OPTIONAL", [*_H100, "--azure-security-type", "Standard"], False),
]


@pytest.mark.parametrize(("rule", "args", "fires"), CASES, ids=lambda v: str(v)[:40])
def test_rule(cli, rule: str, args: list[str], fires: bool) -> None:
    result = cli("compat", "check", *args, "--json")
    assert result.code in (0, 1), result.err
    body = result.json()
    fired = {v["rule"] for v in body["violations"]}
    assert (rule in fired) is fires, body["violations"]
    for v in body["violations"]:
        assert v["source"] and v["message"] and v["fix"]
    errors = [v for v in body["violations"] if v["severity"] == "error"]
    assert body["valid"] is (not errors)
    assert result.code == (1 if errors else 0)


def test_every_rule_is_covered_both_ways() -> None:
    rules = set(load_compat(REPO / "images" / "compat").rules)
    covered = {(r, f) for r, _, f in CASES}
    # FM-REQUIRED depends on a stack's fabric_manager setting: tested through lint.
    for rule in rules - {"FM-REQUIRED"}:
        assert (rule, True) in covered, f"{rule} has no failing case"
        assert (rule, False) in covered, f"{rule} has no passing case"


def test_valid_stack_combination_exits_zero(cli) -> None:
    result = cli(
        "compat", "check", "--driver", "580.95.05", "--cuda", "12.8.1",
        "--nccl", "2.26.2-1+cuda12.8", "--fabric-manager", "580.95.05",
        "--gpu", "H100-SXM-80GB", "--kernel-modules", "open", "--as-of", TODAY,
    )  # fmt: skip
    assert result.code == 0, result.out
    assert "valid" in result.out


def test_several_violations_are_all_listed(cli) -> None:
    result = cli(
        "compat", "check", "--driver", "570.172.08", "--cuda", "12.9",
        "--nccl", "2.26.2-1+cuda13.0", "--gpu", "B200", "--kernel-modules", "proprietary",
        "--fabric-manager", "570.172.07", "--as-of", TODAY,
    )  # fmt: skip
    assert result.code == 1
    for rule in (
        "CUDA-DRIVER-MIN",
        "NCCL-CUDA-MAJOR",
        "MODULES-ARCH",
        "FM-EQUALS-DRIVER",
        "BRANCH-EOL",
    ):
        assert rule in result.out


def test_gpu_names_are_case_insensitive(cli) -> None:
    result = cli(
        "compat", "check", "--driver", "580.95.05", "--cuda", "13.0", "--gpu", "b200", "--json"
    )
    assert result.code == 0
    assert result.json()["combination"]["gpus"] == ["B200"]


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (["--driver", "580.95.05", "--cuda", "12.8", "--gpu", "H999"], "Known GPUs: A10,"),
        (["--driver", "580.x", "--cuda", "12.8"], "cannot parse driver version '580.x'"),
        (["--driver", "580.95.05", "--cuda", "12.7"], "Known versions: 13.2.2,"),
        (["--driver", "580.95.05", "--cuda", "twelve"], "cannot parse CUDA version"),
        (["--driver", "580.95.05", "--cuda", "12.8", "--toolkit", "2.9.1"], "cannot parse toolkit"),
        (
            ["--driver", "580.95.05", "--cuda", "12.8", "--nccl", "2.26.2"],
            "cannot parse NCCL version",
        ),
    ],
)
def test_bad_input_exits_2_with_known_values(cli, args: list[str], expect: str) -> None:
    result = cli("compat", "check", *args)
    assert result.code == 2
    assert expect in result.err
    assert "Traceback" not in result.err


def test_rules_command_lists_every_rule_with_source(cli) -> None:
    result = cli("compat", "rules", "--json")
    assert result.code == 0
    rules = result.json()
    assert {r["id"] for r in rules} == set(load_compat(REPO / "images" / "compat").rules)
    assert all(r["source"] for r in rules)
