"""Every input an adversary controls, and the test that covers each (whole class).

What a hostile or careless party can write reaches imagectl through six doors: the
offline bundle's members, paths on the host, settings, Prometheus's answers, catalog
rows and cloud tags. ``INPUTS`` names each input and the tests that feed it a hostile
value and check what must follow (refused with exit 2 and nothing run, a reason, or
quarantined). The classes whose members the code defines are enumerated from the code:
every kind of bundle member ``make_bundle`` writes, every key of the state folder's
settings, every trust-deciding path (``test_trust_paths.READERS``), so a new member
without a test fails here. Each named test must exist.
"""

from __future__ import annotations

import ast
import re

from imagectl.state_settings import KEYS
from tests.hostile.test_trust_paths import READERS
from tests.support import ROOT

BUNDLE = "tests/supply/test_bundle.py"
TAGS = "tests/clouds/test_hostile_tags.py"
INPUTS: dict[str, dict[str, list[str]]] = {
    "bundle members": {
        "wheels/": [f"{BUNDLE}::test_a_changed_wheel_is_refused_before_anything_is_written",
                    f"{BUNDLE}::test_a_changed_wheel_with_a_forged_manifest_is_refused_by_pip"],
        "installer/": [f"{BUNDLE}::test_an_added_or_missing_file_is_refused"],
        "requirements.lock": [
            f"{BUNDLE}::test_a_changed_wheel_with_a_forged_manifest_is_refused_by_pip"],
        "install.py": [f"{BUNDLE}::test_a_planted_module_is_refused_before_it_runs"],
        "install.sh": [f"{BUNDLE}::test_a_planted_module_is_refused_before_it_runs"],
        "trustpath.py": [f"{BUNDLE}::test_a_planted_module_is_refused_before_it_runs"],
        "BUNDLE.json": [f"{BUNDLE}::test_the_wrong_python_is_refused_naming_both",
                        f"{BUNDLE}::test_a_changed_wheel_with_a_forged_manifest_is_refused_by_pip"],
        "any file not listed (.py, .pyc, __pycache__, .pth)": [
            f"{BUNDLE}::test_a_planted_module_is_refused_before_it_runs",
            f"{BUNDLE}::test_an_added_or_missing_file_is_refused"],
    },
    "host paths": {
        reader: tests for reader, (_what, tests) in READERS.items()
    },
    "settings": {
        "attestation_trust": [
            "tests/provenance/test_state_trust.py::test_a_broken_settings_file_is_exit_2_naming_it",
            "tests/provenance/test_state_trust.py::"
            "test_a_settings_file_others_can_change_is_refused"],
        "IMAGECTL_* numbers": [
            "tests/hostile/test_config.py::test_numeric_settings_that_are_not_numbers"],
        "bundle --platform": [f"{BUNDLE}::test_the_bundle_command_refuses_what_it_cannot_make"],
    },
    "Prometheus answers": {
        "an unusable, partial or deep answer": [
            "tests/fleet/test_prometheus_client.py::test_an_unusable_answer_is_unavailable",
            "tests/fleet/test_prometheus_client.py::test_a_partial_answer_is_unavailable",
            "tests/fleet/test_prometheus_client.py::"
            "test_a_deep_answer_is_unavailable_not_a_recursion_error"],
        "a server that drips or redirects": [
            "tests/fleet/test_prometheus_client.py::test_a_dripping_server_ends_at_the_deadline",
            "tests/fleet/test_prometheus_client.py::"
            "test_no_credentials_follow_a_redirect_to_another_origin"],
        "hostile label text": [
            "tests/hostile/test_inert_writers.py::test_prometheus_labels_are_inert_and_parse"],
    },
    "catalog rows": {
        "a stored receipt": [
            "tests/promotion/test_promote_local.py::"
            "test_a_stored_receipt_edited_into_nonsense_is_bad_input"],
        "a sandbox receipt recorded for a real cloud's image": [
            "tests/promotion/test_sandbox_real_cloud.py::"
            "test_the_gate_refuses_a_sandbox_receipt_for_a_real_cloud_image",
            "tests/promotion/test_sandbox_real_cloud.py::"
            "test_no_attestation_signs_for_a_sandbox_receipt_on_a_real_cloud"],
        "a revocation list and the version kept of it": [
            "tests/promotion/test_revocation.py::test_a_corrupt_published_list_is_refused_and_replaced",
            "tests/provenance/test_revocation_recovery.py::"
            "test_a_node_recovers_from_a_fast_forwarded_list_by_rotating_its_anchor"],
    },
    "cloud tags": {
        "imagectl:revoked": [
            "tests/promotion/test_revocation.py::"
            "test_each_clouds_revoked_tag_and_the_list_outlive_the_catalog",
            "tests/promotion/test_revocation.py::test_no_single_store_can_un_revoke"],
        "imagectl:source-image": [
            "tests/promotion/test_revocation.py::"
            "test_a_source_image_tag_pointing_elsewhere_verifies_nothing"],
        "imagectl:expires-at": [
            "tests/clouds/test_helpers.py::test_expiry",
            "tests/clouds/test_reap_placements.py::"
            "test_only_an_expired_placement_holding_no_instance_is_deleted"],
        "imagectl:canary": [
            "tests/clouds/test_azure_canary.py::test_the_canary_is_a_tagged_version_outside_latest"],
        "imagectl:replica-token": [
            "tests/promotion/test_aws_promote_retry.py::"
            "test_an_untagged_copy_from_an_earlier_attempt_is_used_not_copied_again"],
        "imagectl:stack-digest": [
            "tests/clouds/test_providers.py::test_find_images_by_stack_digest_and_state"],
        "imagectl:state": [
            "tests/clouds/test_providers.py::test_find_images_by_stack_digest_and_state"],
        "imagectl:managed": [f"{TAGS}::test_a_look_alike_managed_tag_is_not_imagectls"],
        "imagectl:stack": [f"{TAGS}::test_a_look_alike_stack_tag_is_another_stack",
                           f"{TAGS}::test_a_hostile_launcher_tag_is_inert_in_the_reapers_output"],
        "imagectl:launched-by": [
            f"{TAGS}::test_a_hostile_launcher_tag_is_inert_in_the_reapers_output"],
        "imagectl:image": [
            f"{TAGS}::test_a_hostile_image_tag_does_not_change_the_image_an_instance_reports"],
    },
}  # fmt: skip

# Cloud tags imagectl writes and no code reads (no hostile value can decide anything), and
# so no hostile-value test: listed so the class is whole (a new tag must be put here or in
# INPUTS). test_a_tag_without_a_hostile_test_is_never_read holds each to that: the day
# code reads one, it needs a test in INPUTS.
TAGS_WITHOUT_A_HOSTILE_TEST = {
    "imagectl:build-id": "written for people; no decision reads it",
    "imagectl:deprecated-at": "written for people; no decision reads it",
    "imagectl:replacement": "written for people; no decision reads it",
    "imagectl:attestation": "written for people; verify finds an envelope by what it "
    "names, never by this tag",
}


def _exists(test: str) -> bool:
    file, name = test.split("::")
    path = ROOT / file
    return path.is_file() and bool(
        re.search(rf"^def {re.escape(name)}\(", path.read_text(encoding="utf-8"), re.M)
    )


def test_every_named_test_exists() -> None:
    missing = [
        f"{door} / {what}: {test}"
        for door, inputs in INPUTS.items()
        for what, tests in inputs.items()
        for test in tests or ["(none)"]
        if test == "(none)" or not _exists(test)
    ]
    assert not missing, "inputs without an existing test:\n" + "\n".join(missing)


def _bundle_member_kinds() -> set[str]:
    """The member names ``make_bundle`` writes: string keys of its members dict (an
    f-string by its folder), and the manifest it adds."""
    tree = ast.parse((ROOT / "pipeline/supply/bundle.py").read_text(encoding="utf-8"))
    fn = next(
        n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "make_bundle"
    )
    kinds = {"BUNDLE.json"}
    for node in ast.walk(fn):
        if isinstance(node, ast.Dict):
            for key in node.keys:
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    kinds.add(key.value)
                elif isinstance(key, ast.JoinedStr) and isinstance(key.values[0], ast.Constant):
                    kinds.add(str(key.values[0].value))
    return {k for k in kinds if "/" in k or "." in k}


def test_every_bundle_member_kind_has_a_test() -> None:
    kinds = _bundle_member_kinds()
    assert {"wheels/", "installer/", "install.py", "install.sh", "trustpath.py"} <= kinds
    assert kinds <= set(INPUTS["bundle members"]), kinds - set(INPUTS["bundle members"])


def test_every_cloud_tag_is_covered_or_its_gap_stated() -> None:
    import imagectl.tags as tags

    every = {v for k, v in vars(tags).items() if k.startswith("TAG_") and isinstance(v, str)}
    covered = set(INPUTS["cloud tags"])
    assert not covered & set(TAGS_WITHOUT_A_HOSTILE_TEST)
    assert every == covered | set(TAGS_WITHOUT_A_HOSTILE_TEST), every ^ (
        covered | set(TAGS_WITHOUT_A_HOSTILE_TEST)
    )


def _reads_of(constant: str) -> list[str]:
    """Where pipeline/ and validators/ use ``constant`` other than to write it: an import,
    a key of a dict literal, or the target of an assignment (``tags[TAG_X] = ...``)."""
    found = []
    for top in ("pipeline", "validators"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel == "pipeline/tags.py":
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            written: set[int] = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.Dict):
                    written |= {id(k) for k in node.keys if k is not None}
                elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
                    written.add(id(node.slice))
            for node in ast.walk(tree):
                is_use = (isinstance(node, ast.Name) and node.id == constant) or (
                    isinstance(node, ast.Attribute) and node.attr == constant)  # fmt: skip
                if is_use and id(node) not in written:
                    found.append(f"{rel}:{node.lineno}")
    return found


def test_a_tag_without_a_hostile_test_is_never_read() -> None:
    import imagectl.tags as tags

    names = {v: k for k, v in vars(tags).items() if k.startswith("TAG_") and isinstance(v, str)}
    read = {tag: _reads_of(names[tag]) for tag in TAGS_WITHOUT_A_HOSTILE_TEST}
    read = {tag: where for tag, where in read.items() if where}
    assert not read, f"read by code, so each needs a hostile-value test in INPUTS: {read}"
    # the check sees reads: a tag the code decides by is found
    assert _reads_of("TAG_MANAGED") and _reads_of("TAG_LAUNCHED_BY")


def test_every_setting_has_a_test() -> None:
    assert set(KEYS) <= set(INPUTS["settings"]), set(KEYS) - set(INPUTS["settings"])
