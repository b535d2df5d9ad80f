"""No option silently dropped, the whole class: the test walks the real
command tree (``imagectl.cli.COMMANDS``, every command and sub-command, every option) and
each option must be proven by one of:

- ``RUN``: a case here, run in process (``imagectl.cli.main``) against the local cloud and
  a SQLite catalog (``tests/promotion/conftest.py``'s world: a predecessor promoted to
  latest in local-a/b/c, a validated candidate), a replay, or a fixture file. Each case
  runs the command twice, on two fresh and equal scenes, once with the option and once
  without, and ``check`` (on the exit code, output, ``--json``, files, catalog rows or the
  cloud's pointers) must hold with it and not without it: the option changed the result.
  A ``refused`` case must end in exit 2 naming the conflict, print nothing on stdout and
  leave the scene as it was;
- ``validate``'s own table (``tests/cli/test_options_honoured.py``'s ``_cases``: the same
  two-run comparison on a replay and on this machine's live path);
- ``ELSEWHERE``: an option whose effect needs what these in-process runs cannot have (a
  VM boot, Packer, a cloud emulator, NVML, a network index, several ranks), each entry
  naming the test that proves it and why; that test must exist and type the option.

A new option anywhere fails ``test_every_option_is_proven`` until it has one."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pytest

from imagectl.cli import main
from tests.cli.commands import every_command
from tests.support import CliText

REPO = Path(__file__).resolve().parents[2]
REGIONS = ("local-a", "local-b", "local-c")
REPLAY = str(REPO / "tests" / "snapshots" / "healthy" / "h200-8x.json")
XID_LOG = "[  12.5] NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus.\n"


@dataclass
class Scene:
    """One fresh local world: ``old`` promoted to latest, ``new`` validated (``cand``)."""

    world: Any
    old: Any
    new: Any
    tmp: Path

    def pointers(self) -> dict[str, str | None]:
        return {r: self.world.provider().get_pointer("local", r) for r in REGIONS}

    def canary(self) -> str | None:
        return self.world.provider().get_canary_pointer("local", "build")

    def state(self, image: Any) -> str:
        return str(self.world.image(image.id).state)

    def events(self) -> list[Any]:
        return self.world.events()

    def values(self) -> dict[str, str]:
        return {"new": self.new.cloud_image_id, "old": self.old.cloud_image_id,
                "tmp": str(self.tmp), "repo": str(REPO),
                "home": str(self.tmp.parent)}  # fmt: skip


@dataclass
class Result:
    code: int
    out: CliText
    err: CliText
    scene: Scene

    def json(self) -> Any:
        return json.loads(self.out)

    def is_json(self) -> bool:
        try:
            json.loads(self.out)
        except ValueError:
            return False
        return True


@dataclass(frozen=True)
class Case:
    base: tuple[str, ...]  # the command line without the option ("{new}": the candidate)
    extra: tuple[str, ...]  # what the option adds
    # holds with the option, not without; None: the exit code or output differs
    check: Callable[[Result], bool] | None = None
    refused: tuple[str, ...] = ()  # else: exit 2 naming these words
    prepare: Callable[[Scene], None] | None = None  # before both runs, on each scene


def _blocked(r: Result) -> bool:
    return r.scene.state(r.scene.new) == "blocked"


def _reason_in_events(word: str) -> Callable[[Result], bool]:
    return lambda r: any(word in (e.message or "") for e in r.scene.events())


def _canary_set(s: Scene) -> None:
    from imagectl.rollout.canary import set_canary

    set_canary(s.world.catalog, s.world.provider(), s.world.stack, s.new.id)


def _second_promoted(s: Scene) -> None:
    from imagectl.promotion import promote

    assert promote(s.world.catalog, s.world.provider(), s.world.stack, s.new.id).exit_code == 0


COMPAT = ("compat", "check", "--driver", "580.95.05", "--cuda", "12.8", "--json")
WATCH = ("watch", "--once", "--replay", REPLAY, "--prometheus", "{tmp}/w.prom", "--json")


def _deprecated(s: Scene) -> None:
    _second_promoted(s)
    assert main(["deprecate", s.old.cloud_image_id, "--reason", "superseded"]) == 0


def _canary_and_store(s: Scene) -> None:
    _canary_set(s)  # the test's IMAGECTL_PROMETHEUS_URL: nothing listens there, a hold


def _block(s: Scene) -> None:
    from imagectl.catalog import repository as repo

    with s.world.catalog.transaction() as sess:
        img = repo.image_row(sess, s.new.id)
        repo.set_state(sess, img, "blocked", reason="test", blocked_reason="bad NCCL")


RUN: dict[str, list[Case]] = {
    # -- the catalog and the local cloud -------------------------------------------------
    "status --stack": [
        Case(("status", "--json"), ("--stack", "h100-training"), lambda r: r.json()["stacks"] == [])
    ],
    "status --cloud": [
        Case(("status", "--json"), ("--cloud", "aws"), lambda r: r.json()["stacks"] == [])
    ],
    "status --events": [
        Case(
            ("status", "--json"),
            ("--events", "1"),
            lambda r: len(r.json()["stacks"][0]["events"]) == 1,
        )
    ],
    "status --limit": [
        Case(("status", "--json"), ("--limit", "1"), lambda r: r.json()["limit"] == 1)
    ],
    "status --json": [Case(("status",), ("--json",), Result.is_json)],
    "block --reason": [
        Case(
            ("block", "{new}", "--reason", "x"),
            ("--reason", "kernel panics"),
            _reason_in_events("kernel panics"),
        )
    ],
    "block --cloud": [
        Case(("block", "{new}", "--reason", "x"), ("--cloud", "aws"), refused=("aws",))
    ],
    "block --json": [Case(("block", "{new}", "--reason", "x"), ("--json",), Result.is_json)],
    "revoke --reason": [
        Case(
            ("revoke", "{new}", "--reason", "x"),
            ("--reason", "leaked key"),
            _reason_in_events("leaked key"),
        )
    ],
    "revoke --cloud": [
        Case(("revoke", "{new}", "--reason", "x"), ("--cloud", "aws"), refused=("aws",))
    ],
    "revoke --json": [Case(("revoke", "{new}", "--reason", "x"), ("--json",), Result.is_json)],
    "promote --stack": [Case(("promote", "--json"), ("--stack", "local"), lambda r: r.code == 0)],
    "promote --cloud": [Case(("promote", "{new}"), ("--cloud", "aws"), refused=("aws",))],
    "promote --regions": [
        Case(
            ("promote", "{new}", "--json"),
            ("--regions", "local-a"),
            lambda r: (
                r.scene.pointers()["local-b"] == r.scene.old.cloud_image_id
                and r.scene.pointers()["local-a"] == r.scene.new.cloud_image_id
            ),
        )
    ],
    "promote --dry-run": [
        Case(
            ("promote", "{new}"),
            ("--dry-run",),
            lambda r: r.scene.pointers()["local-a"] == r.scene.old.cloud_image_id,
        )
    ],
    "promote --canary": [
        Case(
            ("promote", "{new}"),
            ("--canary",),
            lambda r: r.scene.canary() == r.scene.new.cloud_image_id,
        )
    ],
    "promote --force": [
        Case(
            ("promote", "{new}", "--reason", "hotfix"),
            ("--force",),
            lambda r: r.code == 0,
            prepare=lambda s: _block(s),
        )
    ],
    "promote --reason": [
        Case(
            ("promote", "{new}", "--force"),
            ("--reason", "vendor hotfix"),
            lambda r: r.code == 0,
            prepare=lambda s: _block(s),
        )
    ],
    "promote --copy-timeout": [
        Case(("promote", "{new}", "--canary"), ("--copy-timeout", "5"), refused=("--copy-timeout",))
    ],  # its effect: NOT_YET
    "promote --json": [Case(("promote", "{new}"), ("--json",), Result.is_json)],
    "rollback --cloud": [
        Case(
            ("rollback", "--stack", "local"),
            ("--cloud", "aws"),
            lambda r: r.code == 2,
            prepare=_second_promoted,
        )
    ],
    "rollback --reason": [
        Case(
            ("rollback", "--stack", "local"),
            ("--reason", "regression x"),
            _reason_in_events("regression x"),
            prepare=_second_promoted,
        )
    ],
    "rollback --canary": [
        Case(
            ("rollback", "--stack", "local"),
            ("--canary",),
            lambda r: r.scene.canary() is None,
            prepare=_canary_set,
        )
    ],
    "rollback --json": [
        Case(
            ("rollback", "--stack", "local"), ("--json",), Result.is_json, prepare=_second_promoted
        )
    ],
    "rollback --stack": [
        Case(("rollback",), ("--stack", "local"), lambda r: r.code == 0, prepare=_second_promoted)
    ],
    "deprecate --stack": [
        Case(
            ("deprecate", "--keep", "1"),
            ("--stack", "local"),
            lambda r: r.code == 0,
            prepare=_second_promoted,
        )
    ],
    "deprecate --cloud": [
        Case(("deprecate", "{old}"), ("--cloud", "aws"), refused=("aws",), prepare=_second_promoted)
    ],
    "deprecate --keep": [
        Case(
            ("deprecate", "--stack", "local"),
            ("--keep", "1"),
            lambda r: r.scene.state(r.scene.old) == "deprecated",
            prepare=_second_promoted,
        )
    ],
    "deprecate --reason": [
        Case(
            ("deprecate", "{old}"),
            ("--reason", "superseded by x"),
            _reason_in_events("superseded by x"),
            prepare=_second_promoted,
        )
    ],
    "deprecate --delete": [
        Case(
            ("deprecate", "{old}", "--reason", "x"),
            ("--delete",),
            lambda r: (
                r.scene.world.provider().get_image(r.scene.old.cloud_image_id, "local-b") is None
            ),
            prepare=_deprecated,
        )
    ],
    "deprecate --json": [
        Case(("deprecate", "{old}"), ("--json",), Result.is_json, prepare=_second_promoted)
    ],
    # -- rollout: the query-only store is not there (127.0.0.1:9): a hold, recorded ------
    "rollout --stack": [
        Case(("rollout",), ("--stack", "local"), lambda r: r.code == 3, prepare=_canary_and_store)
    ],
    "rollout --cloud": [
        Case(
            ("rollout", "--stack", "local"),
            ("--cloud", "aws"),
            refused=("no 'aws' cloud",),
            prepare=_canary_and_store,
        )
    ],
    "rollout --window": [
        Case(
            ("rollout", "--stack", "local", "--json"),
            ("--window", "30m"),
            lambda r: r.json()["window_s"] == 1800,
            prepare=_canary_and_store,
        )
    ],
    "rollout --dry-run": [
        Case(
            ("rollout", "--stack", "local", "--json"),
            ("--dry-run",),
            lambda r: r.json()["decision_id"] is None,
            prepare=_canary_and_store,
        )
    ],
    "rollout --json": [
        Case(
            ("rollout", "--stack", "local"), ("--json",), Result.is_json, prepare=_canary_and_store
        )
    ],
    # -- files and this workspace ---------------------------------------------------------
    "compat check --driver": [
        Case(
            ("compat", "check", "--cuda", "12.8"), ("--driver", "580.95.05"), lambda r: r.code != 2
        )
    ],
    "compat check --cuda": [
        Case(
            ("compat", "check", "--driver", "580.95.05"), ("--cuda", "12.8"), lambda r: r.code != 2
        )
    ],
    "compat check --nccl": [Case(COMPAT, ("--nccl", "2.26.2-1+cuda12.8"))],
    "compat check --fabric-manager": [Case(COMPAT, ("--fabric-manager", "570.86.15"))],
    "compat check --gpu": [Case(COMPAT, ("--gpu", "B200"))],
    "compat check --kernel-modules": [
        Case((*COMPAT, "--gpu", "B200"), ("--kernel-modules", "proprietary"))
    ],
    "compat check --toolkit": [Case(COMPAT, ("--toolkit", "2.9.1+cu126"))],
    "compat check --profile": [Case(COMPAT, ("--profile", "quick"))],
    "compat check --azure-security-type": [
        Case(COMPAT, ("--azure-security-type", "TrustedLaunch")),  # a violation
        Case(
            COMPAT,
            ("--azure-security-type", "Standard"),  # valid, and said as judged
            lambda r: r.json()["combination"]["azure_security_type"] == "Standard",
        ),
    ],
    "compat check --as-of": [Case(COMPAT, ("--as-of", "2031-01-01"))],
    "compat check --json": [Case(COMPAT[:-1], ("--json",), Result.is_json)],
    "compat rules --json": [Case(("compat", "rules"), ("--json",), Result.is_json)],
    "lint --stack": [Case(("lint", "--json"), ("--stack", "local"))],
    "lint --as-of": [Case(("lint", "--json"), ("--as-of", "2031-01-01"))],
    "lint --json": [Case(("lint",), ("--json",), Result.is_json)],
    "lint --junit": [
        Case(
            ("lint", "--stack", "local"),
            ("--junit", "{tmp}/lint.xml"),
            lambda r: (r.scene.tmp / "lint.xml").is_file(),
        )
    ],
    "receipt show --all": [Case(("receipt", "show", "{home}/pass.json"), ("--all",))],
    "receipt show --json": [
        Case(("receipt", "show", "{home}/pass.json"), ("--json",), Result.is_json)
    ],
    "receipt diff --json": [
        Case(
            ("receipt", "diff", "{home}/pass.json", "{home}/fail.json"), ("--json",), Result.is_json
        )
    ],
    "watch --prometheus": [
        Case(
            ("watch", "--once", "--replay", REPLAY),
            ("--prometheus", "{tmp}/w.prom"),
            lambda r: (r.scene.tmp / "w.prom").is_file(),
        )
    ],
    "watch --interval": [Case(WATCH, ("--interval", "5"), refused=("--interval", "--once"))],
    "watch --replay": [
        Case(("watch", "--once", "--prometheus", "{tmp}/w.prom", "--json"), ("--replay", REPLAY))
    ],
    "watch --kernel-log": [Case(WATCH, ("--kernel-log", "{home}/kernel.log"))],
    "watch --json": [Case(WATCH[:-1], ("--json",), Result.is_json)],
}


# why a command's options are proven by another test, not by a case here
WHY = {
    "attest": "signs with a key it makes or a KMS signer (the provenance tests' signers)",
    "build": "runs Packer per cloud (the build tests run its dry run and the local build)",
    "bundle": "builds and installs a wheelhouse (pip, a second Python)",
    "collectives": "runs torch.distributed ranks (gloo) across hosts",
    "diff": "reads each image's SBOM (the real inventory fixture)",
    "doctor": "asks a cloud's APIs (the doctor fakes, moto)",
    "drift": "reads NVIDIA's index fixture, a cloud emulator and the fleet's receipts",
    "plan": "resolves base images on a cloud emulator (or offline)",
    "promote": "needs a concurrent promotion holding the stack's lock",
    "reap": "lists instances on a remote cloud's emulator (reap takes no local cloud)",
    "rollback": "needs a concurrent promotion holding the stack's lock",
    "rollout": "its --deadline needs a Prometheus that accepts and never answers",
    "run": "boots the local cloud's VM (QEMU)",
    "scan": "reads what its own tests set up",
    "snapshot": "reads NVML and DCGM on a GPU host (refused without one)",
    "validate-image": "launches instances on a cloud emulator and validates over SSH",
    "verify": "reads signed documents the provenance fixtures make",
    "verify-node": "reads signed documents the provenance fixtures make, on a node",
    "watch": "without --once it looks until SIGTERM",
}

# option -> the test that proves it (it must type the command with the option)
ELSEWHERE: dict[str, str] = {
    "collectives --toolkit-wheelhouse": (
        "tests/validators/test_toolkit_venv.py::"
        "test_collectives_installs_the_toolkit_it_is_given_and_checks_it_first"
    ),
    "validate-image --wheel": (
        "tests/clouds/test_validate_image_options.py::test_wheel_is_the_validator_the_host_runs"
    ),
    "collectives --expect": (
        "tests/validators/test_collectives_options.py::"
        "test_expect_and_shape_are_read_before_any_rank_starts"
    ),
    "collectives --shape": (
        "tests/validators/test_collectives_options.py::"
        "test_expect_and_shape_are_read_before_any_rank_starts"
    ),
    "collectives --op": (
        "tests/validators/test_collectives_options.py::"
        "test_op_max_bytes_profile_and_json_shape_the_run"
    ),
    "collectives --max-bytes": (
        "tests/validators/test_collectives_options.py::"
        "test_op_max_bytes_profile_and_json_shape_the_run"
    ),
    "collectives --profile": (
        "tests/validators/test_collectives_options.py::"
        "test_op_max_bytes_profile_and_json_shape_the_run"
    ),
    "collectives --json": (
        "tests/validators/test_collectives_options.py::"
        "test_op_max_bytes_profile_and_json_shape_the_run"
    ),
    "collectives --address": (
        "tests/validators/test_collectives_options.py::"
        "test_address_not_in_the_hostfile_is_bad_input"
    ),
    "collectives --device": (
        "tests/validators/test_collectives_options.py::"
        "test_device_cuda_with_a_cpu_torch_is_one_error_naming_it"
    ),
    "diff --cloud": "tests/promotion/test_diff.py::test_cloud_scopes_cloud_image_ids",
    "rollback --wait": (
        "tests/promotion/test_concurrent_promote.py::"
        "test_rollback_waits_for_a_running_promotion_only_with_wait"
    ),
    "doctor --hosts": "tests/clouds/test_doctor.py::test_hosts_is_the_count_the_quota_must_hold",
    "drift --manifest": (
        "tests/drift/test_drift_hosts.py::"
        "test_a_manifest_given_on_the_command_line_is_what_nodes_are_held_to"
    ),
    "drift --nvidia-repo-url": (
        "tests/drift/test_drift_upstream_nvidia.py::test_the_repo_url_option_is_the_index_read"
    ),
    "validate-image --profile": (
        "tests/clouds/test_validate_image_options.py::test_profile_is_the_one_the_host_runs"
    ),
    "validate-image --location": (
        "tests/clouds/test_validate_image_options.py::test_location_is_the_zone_launched_in"
    ),
    "validate-image --ttl": (
        "tests/clouds/test_validate_image_options.py::test_ttl_is_the_expiry_tag_reap_reads"
    ),
    "validate-image --validator-timeout": (
        "tests/clouds/test_validate_image_options.py::test_validator_timeout_ends_a_hung_validator"
    ),
    "build --inject-fault": (
        "tests/packer/test_build_cli.py::"
        "test_local_build_options_are_refused_for_a_cloud_before_anything_is_recorded"
    ),
    "collectives --nodes": (
        "tests/validators/test_shared_options.py::test_a_missing_hostfile_is_exit_2_on_both"
    ),
    "drift --base-images": (
        "tests/drift/test_drift_base_images.py::"
        "test_a_newer_base_image_is_drift_with_the_proposed_pin"
    ),
    "bundle --json": "tests/supply/test_bundle.py::test_bundle_json_describes_the_bundle_it_wrote",
    "verify-node --json": (
        "tests/provenance/test_node_attestation.py::"
        "test_verify_node_json_says_the_same_verdict_as_data"
    ),
    "doctor --deadline": (
        "tests/cli/test_command_deadlines.py::"
        "test_each_command_ends_by_its_deadline_naming_the_call"
    ),
    "drift --deadline": (
        "tests/cli/test_command_deadlines.py::"
        "test_each_command_ends_by_its_deadline_naming_the_call"
    ),
    "promote --deadline": (
        "tests/cli/test_command_deadlines.py::"
        "test_each_command_ends_by_its_deadline_naming_the_call"
    ),
    "reap --deadline": (
        "tests/cli/test_command_deadlines.py::"
        "test_each_command_ends_by_its_deadline_naming_the_call"
    ),
    "validate-image --deadline": (
        "tests/cli/test_command_deadlines.py::"
        "test_each_command_ends_by_its_deadline_naming_the_call"
    ),
    "rollout --deadline": (
        "tests/fleet/test_rollout_cli.py::test_a_prometheus_that_never_answers_ends_at_the_deadline"
    ),
    "attest --stack": (
        "tests/provenance/test_sign_permissions.py::"
        "test_the_kms_signer_under_exactly_the_sign_document"
    ),
    "attest --cloud": (
        "tests/provenance/test_sign_permissions.py::"
        "test_the_kms_signer_under_exactly_the_sign_document"
    ),
    "attest --new-key": (
        "tests/provenance/test_signers.py::test_attest_new_key_is_the_command_that_creates_the_key"
    ),
    "attest --save-trust": "tests/provenance/test_state_trust.py::test_save_trust_alone_is_refused",
    "attest --json": "tests/promotion/test_json_image_id.py::test_image_is_the_id_in_every_json",
    "build --stack": "tests/hostile/test_stacks.py::test_a_stack_name_is_never_a_path",
    "build --cloud": "tests/hostile/test_stacks.py::test_a_stack_name_is_never_a_path",
    "build --dry-run": "tests/hostile/test_stacks.py::test_a_stack_name_is_never_a_path",
    "build --var-dir": (
        "tests/provenance/test_signers.py::"
        "test_build_dry_run_makes_no_key_and_the_image_trusts_the_pinned_keys"
    ),
    "build --build-id": "tests/hostile/test_stacks.py::test_build_id_cannot_leave_the_state_folder",
    "build --var": "tests/hostile/test_stacks.py::test_build_var_must_be_a_declared_variable",
    "build --skip-provisioning": (
        "tests/clouds/test_aws_moto_server_e2e.py::"
        "test_the_readme_sandbox_path_promotes_and_rolls_back"
    ),
    "build --reuse": (
        "tests/embedded/test_one_pipeline.py::"
        "test_validate_image_on_the_local_cloud_records_what_the_run_recorded"
    ),
    "build --json": (
        "tests/embedded/test_e2e.py::test_a_build_differing_by_one_pin_diffs_as_exactly_that_change"
    ),
    "bundle --python": (
        "tests/supply/test_bundle.py::test_the_bundle_command_refuses_what_it_cannot_make"
    ),
    "bundle --platform": (
        "tests/supply/test_bundle.py::test_the_bundle_command_refuses_what_it_cannot_make"
    ),
    "bundle -o": "tests/supply/test_bundle.py::test_the_bundle_command_refuses_what_it_cannot_make",
    "diff --stack": "tests/promotion/test_diff.py::test_an_image_without_an_sbom_is_bad_input",
    "diff --format": "tests/promotion/test_diff.py::test_one_changed_pin_is_exactly_the_diff",
    "diff --json": "tests/promotion/test_ancestry.py::test_the_same_base_is_no_change",
    "doctor --stack": (
        "tests/cli/test_headlines.py::"
        "test_the_placeholder_organization_arn_is_named_whole_with_its_own_fix"
    ),
    "doctor --cloud": (
        "tests/cli/test_headlines.py::"
        "test_the_placeholder_organization_arn_is_named_whole_with_its_own_fix"
    ),
    "doctor --role": (
        "tests/clouds/test_build_permissions.py::"
        "test_build_and_doctor_under_exactly_the_build_document"
    ),
    "doctor --runner-cidr": (
        "tests/cli/test_headlines.py::"
        "test_the_placeholder_organization_arn_is_named_whole_with_its_own_fix"
    ),
    "doctor --json": (
        "tests/cli/test_headlines.py::"
        "test_the_placeholder_organization_arn_is_named_whole_with_its_own_fix"
    ),
    "drift --stack": "tests/cli/test_headlines.py::test_drift_says_first_which_checks_did_not_run",
    "drift --upstream": (
        "tests/cli/test_headlines.py::test_drift_says_first_which_checks_did_not_run"
    ),
    "drift --replicas": (
        "tests/drift/test_drift_replicas_fleet.py::test_json_flag_like_every_read_command"
    ),
    "drift --fleet": "tests/cli/test_headlines.py::test_drift_says_first_which_checks_did_not_run",
    "drift --hosts": "tests/hostile/test_json.py::test_one_bad_fleet_receipt_does_not_stop_drift",
    "drift --format": "tests/cli/test_headlines.py::test_drift_says_first_which_checks_did_not_run",
    "drift --json": "tests/cli/test_headlines.py::test_drift_says_first_which_checks_did_not_run",
    "drift --write": (
        "tests/drift/test_drift_upstream_nvidia.py::"
        "test_proposal_that_breaks_a_rule_is_reported_but_not_written"
    ),
    "drift --as-of": "tests/drift/test_drift_upstream_nvidia.py::test_table_output",
    "plan --stack": "tests/hostile/test_stacks.py::test_a_stack_name_is_never_a_path",
    "plan --cloud": (
        "tests/cli/test_headlines.py::"
        "test_plan_without_credentials_is_one_paragraph_per_cloud_naming_offline"
    ),
    "plan --out": "tests/stacks/test_lint_and_plan.py::test_plan_human_view_and_bad_cloud",
    "plan --offline": (
        "tests/cli/test_headlines.py::"
        "test_plan_without_credentials_is_one_paragraph_per_cloud_naming_offline"
    ),
    "plan --json": (
        "tests/workflows/test_workflow_commands.py::"
        "test_parser_finds_invocations_across_lines_and_expressions"
    ),
    "promote --wait": (
        "tests/promotion/test_concurrent_promote.py::test_second_promotion_waits_with_wait"
    ),
    "reap --cloud": (
        "tests/cli/test_headlines.py::test_reap_says_first_that_an_account_could_not_be_listed"
    ),
    "reap --stack": (
        "tests/cli/test_headlines.py::test_reap_says_first_that_an_account_could_not_be_listed"
    ),
    "reap --dry-run": (
        "tests/clouds/test_validation_runs.py::"
        "test_reaper_reports_an_instance_once_however_many_stacks_list_it"
    ),
    "reap --json": (
        "tests/cli/test_headlines.py::test_reap_says_first_that_an_account_could_not_be_listed"
    ),
    "run --stack": (
        "tests/embedded/test_base_and_options.py::test_cli_a_stack_without_local_cloud_is_bad_input"
    ),
    "run --regions": (
        "tests/embedded/test_base_and_options.py::test_cli_too_many_regions_is_bad_input"
    ),
    "run --inject-fault": (
        "tests/embedded/test_base_and_options.py::test_cli_unknown_fault_is_bad_input"
    ),
    "scan --stack": (
        "tests/provenance/test_vulnerability_gate.py::test_a_report_that_is_not_grypes_is_exit_2"
    ),
    "scan --json": (
        "tests/provenance/test_vulnerability_gate.py::test_json_names_each_blocking_finding"
    ),
    "snapshot -o": "tests/cli/test_json_everywhere.py::test_snapshot_json",
    "snapshot --description": "tests/cli/test_json_everywhere.py::test_snapshot_json",
    "snapshot --hygiene-root": (
        "tests/validators/test_validator_receipts.py::"
        "test_snapshot_records_previous_boots_for_replay"
    ),
    "snapshot --dcgm-level": (
        "tests/validators/test_dcgm_live.py::test_snapshot_records_the_run_and_replay_judges_it"
    ),
    "snapshot --load-s": (
        "tests/cli/test_options_honoured.py::"
        "test_snapshot_load_without_gpus_is_refused_before_capturing"
    ),
    "snapshot --history": (
        "tests/validators/test_validator_receipts.py::"
        "test_snapshot_records_previous_boots_for_replay"
    ),
    "snapshot --no-nccl-probe": "tests/cli/test_json_everywhere.py::test_snapshot_json",
    "snapshot --json": "tests/cli/test_json_everywhere.py::test_snapshot_json",
    "validate-image --cloud": (
        "tests/clouds/test_helpers.py::test_validate_image_without_stack_or_catalog_record"
    ),
    "validate-image --stack": (
        "tests/clouds/test_helpers.py::test_validate_image_needs_a_known_image"
    ),
    "validate-image --shape": "tests/cli/test_completion.py::test_shapes_and_gpus",
    "validate-image --hosts": (
        "tests/clouds/test_multinode_validation.py::"
        "test_the_gate_refuses_a_two_node_stack_without_the_fabric_receipt"
    ),
    "validate-image --nodes": (
        "tests/clouds/test_multinode_validation.py::"
        "test_two_nodes_in_the_clouds_placement_run_collectives_and_record_the_fabric"
    ),
    "validate-image --max-retries": (
        "tests/clouds/test_validation_runs.py::"
        "test_every_validation_shape_of_the_stack_is_validated"
    ),
    "validate-image --reach-timeout": (
        "tests/clouds/test_multinode_validation.py::"
        "test_the_gate_refuses_a_two_node_stack_without_the_fabric_receipt"
    ),
    "validate-image --runner-cidr": (
        "tests/clouds/test_helpers.py::test_validate_image_needs_a_known_image"
    ),
    "validate-image --ssh-key": (
        "tests/embedded/test_e2e_multinode.py::"
        "test_gcp_two_booted_nodes_run_gloo_across_their_private_network"
    ),
    "validate-image --inventory-override": (
        "tests/hostile/test_cloud_errors.py::test_inventory_override_is_read_before_any_cloud_call"
    ),
    "validate-image --receipts-dir": (
        "tests/clouds/test_multinode_validation.py::"
        "test_two_nodes_in_the_clouds_placement_run_collectives_and_record_the_fabric"
    ),
    "validate-image --junit": (
        "tests/clouds/test_validate_image_junit.py::test_a_blocked_image_in_junit"
    ),
    "validate-image --sandbox": (
        "tests/promotion/test_sandbox_real_cloud.py::"
        "test_validate_image_sandbox_is_refused_on_a_real_cloud"
    ),
    "validate-image --json": (
        "tests/clouds/test_multinode_validation.py::"
        "test_the_gate_refuses_a_two_node_stack_without_the_fabric_receipt"
    ),
    "verify --stack": (
        "tests/promotion/test_image_identity.py::test_online_verify_honours_its_scoping_flags"
    ),
    "verify --cloud": (
        "tests/promotion/test_image_identity.py::test_online_verify_honours_its_scoping_flags"
    ),
    "verify --trust": (
        "tests/provenance/test_signers.py::test_an_empty_or_foreign_trust_file_is_bad_input"
    ),
    "verify --envelope": (
        "tests/provenance/test_signers.py::test_an_empty_or_foreign_trust_file_is_bad_input"
    ),
    "verify --revocations": (
        "tests/provenance/test_revocation_recovery.py::test_imagectl_verify_explains_and_recovers"
    ),
    "verify --valid-hours": (
        "tests/cli/test_options_honoured.py::test_verify_refuses_what_its_mode_does_not_read"
    ),
    "verify --export-trust": (
        "tests/cli/test_options_honoured.py::test_verify_refuses_what_its_mode_does_not_read"
    ),
    "verify --export-envelope": (
        "tests/cli/test_options_honoured.py::test_verify_refuses_what_its_mode_does_not_read"
    ),
    "verify --export-revocations": (
        "tests/cli/test_options_honoured.py::test_verify_refuses_what_its_mode_does_not_read"
    ),
    "verify --sign-trust": (
        "tests/provenance/test_trust_rotation.py::"
        "test_the_commands_sign_in_turn_rotate_and_refuse_a_replay"
    ),
    "verify --rotate-trust": (
        "tests/provenance/test_trust_rotation.py::"
        "test_the_commands_sign_in_turn_rotate_and_refuse_a_replay"
    ),
    "verify --json": (
        "tests/cli/test_options_honoured.py::test_verify_refuses_what_its_mode_does_not_read"
    ),
    "verify-node --envelope": (
        "tests/hostile/test_inert_writers.py::test_terminal_verify_and_verify_node_are_inert"
    ),
    "verify-node --trust": (
        "tests/hostile/test_inert_writers.py::test_terminal_verify_and_verify_node_are_inert"
    ),
    "verify-node --manifest": (
        "tests/hostile/test_inert_writers.py::test_terminal_verify_and_verify_node_are_inert"
    ),
    "verify-node --revocations": (
        "tests/hostile/test_inert_writers.py::test_terminal_verify_and_verify_node_are_inert"
    ),
    "verify-node --revocations-state": (
        "tests/hostile/test_inert_writers.py::test_terminal_verify_and_verify_node_are_inert"
    ),
    "verify-node --image-id": (
        "tests/hostile/test_inert_writers.py::test_terminal_verify_and_verify_node_are_inert"
    ),
    "verify-node --rotate-trust": (
        "tests/provenance/test_trust_rotation.py::"
        "test_the_commands_sign_in_turn_rotate_and_refuse_a_replay"
    ),
    "watch --once": "tests/cli/test_watch_cli.py::test_watch_once_json",
}

# options no test proves yet (gaps to close); they keep
# test_no_option_is_left_unproven failing (a strict xfail) until each has a proof
NOT_YET: set[str] = {
    "build --timeout",
    "build --accel",
    "run --accel",
    "run --rebuild",
    "run --rebuild-base",
    "run --json",
    "snapshot --fabric-interval-s",
}


def _validate_table() -> set[str]:
    """``validate``'s options that tests/cli/test_options_honoured.py's table proves."""
    from tests.cli.test_options_honoured import _cases

    cmd = dict(every_command())["validate"]
    by_name = {p.name: p.opts[0] for p in cmd.params if isinstance(p, click.Option)}
    return {f"validate {by_name[name]}" for name in _cases(Path("/t"))}


def test_every_option_is_proven() -> None:
    """The walk: every option of every command has exactly one proof."""
    walked = _keys()
    run = {k for k, cases in RUN.items() if cases}
    tables = [run, _validate_table(), set(ELSEWHERE), NOT_YET]
    proven = set().union(*tables)
    assert walked - proven == set(), f"options with no proof: {sorted(walked - proven)}"
    assert proven - walked == set(), f"proofs of no option: {sorted(proven - walked)}"
    assert sum(map(len, tables)) == len(proven), "an option proven twice: keep one"
    assert len(walked) > 200


def _strings(node: ast.AST) -> list[str]:
    items = [*node.args, *(k.value for k in node.keywords)] if isinstance(node, ast.Call) else []
    items += getattr(node, "elts", [])
    return [e.value for e in items if isinstance(e, ast.Constant) and isinstance(e.value, str)]


def _types(
    fn: ast.FunctionDef, words: list[str], flags: list[str],
    helpers: dict[str, ast.FunctionDef] | None = None,
) -> bool:  # fmt: skip
    """Whether the test types the command (its words) with one of the option's flags in
    one call or list, or one of them in its body and the other in its parametrize table.
    Its body includes the module's own helpers it calls (one level: ``_report(cli)``
    that runs ``cli("drift", ..., "--base-images")``)."""
    kinds = (ast.Call, ast.List, ast.Tuple)
    called = {n.func.id for n in ast.walk(fn) if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Name)}  # fmt: skip
    nodes = [fn, *((helpers or {})[c] for c in sorted(called & set(helpers or {})))]
    body = [_strings(n) for f in nodes for n in ast.walk(f) if isinstance(n, kinds)]
    table = [_strings(n) for d in fn.decorator_list for n in ast.walk(d) if isinstance(n, kinds)]
    if any(all(w in c for w in words) and any(f in c for f in flags) for c in body):
        return True
    # a helper that types the command, called with the flag (``_run(cli, ..., "--ttl")``)
    for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
        helper = (helpers or {}).get(call.func.id) if isinstance(call.func, ast.Name) else None
        if helper is None or not any(f in _strings(call) for f in flags):
            continue
        inner = [_strings(n) for n in ast.walk(helper) if isinstance(n, kinds)]
        if any(all(w in c for w in words) for c in inner):
            return True
    has_cmd = any(all(w in c for w in words) for c in body)
    if has_cmd and any(any(f in c for f in flags) for c in table):
        return True
    # or the command in its parametrize table and the flag in its body
    typed = any(all(w in c for w in words) for c in table)
    return typed and any(any(f in c for f in flags) for c in body)


def test_each_elsewhere_names_a_test_that_types_the_option() -> None:
    """Each ELSEWHERE entry names a test that exists and runs the command with the
    option, and its command says why it is not a case here."""
    flags = {}
    for name, cmd in every_command():
        for p in cmd.params:
            if isinstance(p, click.Option):
                flags[f"{name} {p.opts[0]}"] = [*p.opts, *p.secondary_opts]
    wrong = []
    for key, node in ELSEWHERE.items():
        command = key.rsplit(" ", 1)[0]
        assert WHY.get(command.split()[0], "").strip(), f"{key}: no WHY for {command}"
        path, _, func = node.partition("::")
        tree = ast.parse((REPO / path).read_text())
        found = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == func]
        helpers = {n.name: n for n in tree.body
                   if isinstance(n, ast.FunctionDef) and not n.name.startswith("test")}  # fmt: skip
        if not found:
            wrong.append(f"{key}: {node} does not exist")
        elif not _types(found[0], command.split(), flags[key], helpers):
            wrong.append(f"{key}: {node} never types {command} {flags[key][0]}")
    assert wrong == []


@pytest.mark.xfail(strict=True, reason="options no test proves yet (NOT_YET)")
def test_no_option_is_left_unproven() -> None:
    assert set() == NOT_YET


def _keys() -> set[str]:
    out = set()
    for name, cmd in every_command():
        for p in cmd.params:
            if isinstance(p, click.Option) and p.name != "help":
                out.add(f"{name} {p.opts[0]}")
    return out


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Any, Any]]:
    """The scene, made once (the slow part: two validated images, one promoted to three
    regions) in a folder that each run gets back as it was (copied from ``saved``)."""
    import shutil

    from imagectl.promotion import promote
    from tests.conftest import _state_key
    from tests.promotion.conftest import _world

    home = tmp_path_factory.mktemp("scene")
    saved = tmp_path_factory.mktemp("saved") / "scene"
    with pytest.MonkeyPatch.context() as mp:
        (home / "state").mkdir()
        mp.setenv("IMAGECTL_STATE_DIR", str(home / "state"))
        mp.setenv("IMAGECTL_ATTESTATION_TRUST", str(_state_key(home / "state")))
        mp.delenv("IMAGECTL_ATTESTATION_SIGNER", raising=False)
        gen = _world(home / "w", f"sqlite:///{home / 'w' / 'catalog.db'}")
        (home / "w").mkdir()
        world = next(gen)
        mp.setenv("IMAGECTL_LOCAL_REGISTRY", str(world.registry))
        old = world.validated()
        assert promote(world.catalog, world.provider(), world.stack, old.id).exit_code == 0
        new = world.validated()
        gen.close()
        (home / "kernel.log").write_text(XID_LOG)
        assert main(["validate", "--replay", REPLAY, "-o", str(home / "pass.json")]) == 0
        assert main(["validate", "--replay", REPLAY, "--kernel-log", str(home / "kernel.log"),
                     "-o", str(home / "fail.json")]) == 1  # fmt: skip
    shutil.copytree(home, saved, symlinks=True)
    yield home, saved, old, new


def _scene(template: tuple[Path, Path, Any, Any], monkeypatch: pytest.MonkeyPatch) -> Scene:
    """The template's scene as it was made, with this test's environment pointing at it."""
    import shutil

    from imagectl.catalog.db import open_catalog
    from imagectl.stacks import load_resolved
    from tests.promotion.conftest import World

    home, saved, old, new = template
    shutil.rmtree(home)
    shutil.copytree(saved, home, symlinks=True)
    db_url = f"sqlite:///{home / 'w' / 'catalog.db'}"
    _, resolved = load_resolved(REPO / "images", "local")
    world = World(home / "w", db_url, home / "w" / "registry", open_catalog(db_url), resolved)
    for key, value in world.env().items():
        if key.startswith("IMAGECTL_") and key != "IMAGECTL_STATE_DIR":
            monkeypatch.setenv(key, value)
    monkeypatch.setenv("IMAGECTL_STATE_DIR", str(home / "state"))
    monkeypatch.setenv("IMAGECTL_ATTESTATION_TRUST",
                       str(home / "state" / "keys" / "attestation.pub.json"))  # fmt: skip
    return Scene(world, old, new, home / "tmp")


def _run(scene: Scene, args: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> Result:
    capsys.readouterr()
    scene.tmp.mkdir(exist_ok=True)
    values = scene.values()
    code = main([a.format(**values) if "{" in a else a for a in args])
    got = capsys.readouterr()
    return Result(code, CliText(got.out), CliText(got.err), scene)


CASES = [(key, i) for key, cases in RUN.items() for i in range(len(cases))]


@pytest.mark.parametrize(("key", "index"), CASES, ids=[f"{k}-{i}" for k, i in CASES])
def test_each_option_changes_the_result_or_is_refused(
    key: str, index: int, template: Any, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    case = RUN[key][index]
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("IMAGECTL_PROMETHEUS_URL", "http://127.0.0.1:9")
    runs = []
    for args in (case.base, case.base + case.extra):
        scene = _scene(template, monkeypatch)
        if case.prepare:
            case.prepare(scene)
        before = (scene.pointers(), len(scene.events()))
        r = _run(scene, args, capsys)
        assert "Traceback" not in r.err, r.err
        after = (scene.pointers(), len(scene.events()))
        ok = case.check(r) if case.check else None
        scene.world.catalog.close()
        runs.append((r, before, after, ok))
    (base, _, _, base_ok), (got, before, after, got_ok) = runs
    if case.refused:
        assert got.code == 2 and got.out == "", (got.code, got.out, got.err)
        for word in case.refused:
            assert word in got.err, (word, got.err)
        assert before == after, "a refused command changed the scene"
        return
    if case.check is None:
        assert (got.code, got.out) != (base.code, base.out), (key, "changed nothing", got.out)
        return
    assert got_ok, (key, got.code, got.out[-1500:], got.err[-1500:])
    assert not base_ok, (key, "holds without the option too", base.out[-800:])
