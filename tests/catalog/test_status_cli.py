"""``imagectl status`` on a catalog filled through the repository API, and the errors a
broken database URL gives (exit 2, one paragraph, no traceback)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from imagectl.catalog import repository as repo
from imagectl.catalog.db import open_catalog
from imagectl.cli import main
from tests.support import CliText, flat, make_receipt

STACK = "h100-training"


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["status", *args])
    out, err = capsys.readouterr()
    return code, CliText(out), CliText(err)


def _fill(url: str) -> dict[str, int]:
    """Two regions promoted (one with a previous image), candidates, a blocked image and a
    second stack on another cloud."""
    catalog = open_catalog(url)
    ids: dict[str, int] = {}
    with catalog.transaction() as s:
        old = repo.record_build(s, build_id="b-old", stack=STACK, stack_digest="sha256:01",
                                cloud="aws")  # fmt: skip
        new = repo.record_build(s, build_id="b-new", stack=STACK, stack_digest="sha256:02",
                                cloud="aws")  # fmt: skip
        for region in ("us-east-1", "eu-west-1"):
            o = repo.record_image(s, build=old, cloud_image_id=f"ami-old-{region}", region=region,
                                  state="validated")  # fmt: skip
            p = repo.start_promotion(s, o, target_regions=[region])
            repo.set_pointer(s, STACK, "aws", region, o)
            repo.finish_promotion(s, p, completed_regions=[region])
            ids[f"old-{region}"] = o.id
        n = repo.record_image(s, build=new, cloud_image_id="ami-new-us-east-1",
                              region="us-east-1", state="validated")  # fmt: skip
        p = repo.start_promotion(s, n, target_regions=["us-east-1"])
        repo.set_pointer(s, STACK, "aws", "us-east-1", n)
        repo.finish_promotion(s, p, completed_regions=["us-east-1"])
        ids["new"] = n.id
        cand = repo.record_image(s, build=new, cloud_image_id="ami-new-eu-west-1",
                                 region="eu-west-1")  # fmt: skip
        repo.set_state(s, cand, "validating", reason="validation started")
        ids["candidate"] = cand.id
        bad = repo.record_image(s, cloud_image_id="ami-bad", region="us-east-1", cloud="aws",
                                stack=STACK, stack_digest="sha256:03")  # fmt: skip
        repo.set_state(s, bad, "validating", reason="validation started")
        repo.set_state(s, bad, "blocked", reason="receipt failed",
                       blocked_reason="XID 79 on p5.48xlarge host i-0abc")  # fmt: skip
        ids["blocked"] = bad.id
        loc = repo.record_image(s, cloud_image_id="/var/lib/imagectl/local-1.qcow2",
                                region="local-a", cloud="local", stack="local",
                                stack_digest="sha256:99")  # fmt: skip
        ids["local"] = loc.id
    catalog.close()
    return ids


def test_empty_catalog_is_friendly(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys)
    assert code == 0
    assert "no images yet" in out
    code, out, _ = _run(capsys, "--json")
    assert code == 0
    assert json.loads(out)["stacks"] == []


def test_status_json_shape(
    catalog_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = _fill(catalog_url)
    monkeypatch.setenv("IMAGECTL_DATABASE_URL", catalog_url)
    code, out, err = _run(capsys, "--json", "--events", "3")
    assert code == 0, err
    data = json.loads(out)
    assert [(e["stack"], e["cloud"]) for e in data["stacks"]] == [
        (STACK, "aws"),
        ("local", "local"),
    ]
    h100 = data["stacks"][0]
    assert set(h100) == {
        "stack", "cloud", "validation_shapes", "current", "candidates", "blocked", "events",
        "unfinished_flip", "partial", "canary", "rollouts", "hidden",
    }  # fmt: skip
    assert (h100["canary"], h100["rollouts"]) == ([], [])  # the canary: tests/fleet
    assert h100["validation_shapes"] == ["p5.48xlarge"]  # images/stacks/h100-training.yaml
    assert h100["unfinished_flip"] is None  # tests/promotion/test_flip_records.py: a half flip
    current = {c["region"]: c for c in h100["current"]}
    assert set(current) == {"us-east-1", "eu-west-1"}
    east = current["us-east-1"]
    assert east["image"]["cloud_image_id"] == "ami-new-us-east-1"
    assert east["image"]["state"] == "promoted" and east["image"]["build_id"] == "b-new"
    assert east["previous"]["id"] == ids["old-us-east-1"]
    assert current["eu-west-1"]["previous"] is None
    assert current["eu-west-1"]["image"]["id"] == ids["old-eu-west-1"]
    assert [c["id"] for c in h100["candidates"]] == [ids["candidate"]]
    assert h100["candidates"][0]["state"] == "validating"
    (blocked,) = h100["blocked"]
    assert blocked["id"] == ids["blocked"]
    assert blocked["reason"] == "XID 79 on p5.48xlarge host i-0abc"
    assert len(h100["events"]) == 3
    newest = h100["events"][0]
    assert newest["kind"] == "image.state" and newest["image_id"] == ids["blocked"]
    assert "validating -> blocked" in newest["message"]
    assert set(newest) == {"at", "actor", "kind", "image_id", "message"}
    local = data["stacks"][1]
    assert local["current"] == [] and [c["id"] for c in local["candidates"]] == [ids["local"]]

    code, out, _ = _run(capsys, "--json", "--cloud", "local")
    assert [e["stack"] for e in json.loads(out)["stacks"]] == ["local"]
    code, out, _ = _run(capsys, "--json", "--stack", "b200-training")
    assert code == 0 and json.loads(out)["stacks"] == []
    code, out, err = _run(capsys, "--json", "--stack", "nope")  # no such stack file: bad input
    assert code == 2 and out == "" and "no stack named 'nope'" in err


def test_status_table_for_people(
    catalog_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(catalog_url)
    monkeypatch.setenv("IMAGECTL_DATABASE_URL", catalog_url)
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = _run(capsys, "--stack", STACK)
    assert code == 0
    assert f"{STACK} on aws" in out and "local on local" not in out
    assert "ami-new-us-east-1" in out and "ami-old-us-east-1" in out  # current and previous
    assert "ami-new-eu-west-1" in out and "validating" in out  # candidate
    assert "XID 79 on p5.48xlarge host i-0abc" in out  # blocked reason
    assert "latest events" in out
    code, out, _ = _run(capsys, "--stack", "b200-training")
    assert code == 0 and "no images yet for stack b200-training" in out


TWO_SHAPES = "inference-l4-a10g"  # validates on g6.xlarge (L4) and g5.xlarge (A10G) on AWS


def _fill_shapes(url: str) -> None:
    """An image of a two-shape stack with a passing receipt on the L4 shape only (an older
    failing one before it), and one under a shape the stack does not name."""
    catalog = open_catalog(url)
    with catalog.transaction() as s:
        img = repo.record_image(s, cloud_image_id="ami-l4only", region="us-west-2", cloud="aws",
                                stack=TWO_SHAPES, stack_digest="sha256:44")  # fmt: skip
        repo.set_state(s, img, "validating", reason="validation started")
        for shape, host, verdict, action in (
            ("g6.xlarge", "i-0old", "fail", "REBOOT"),
            ("g6.xlarge", "i-0l4", "pass", "NONE"),
            ("p5.48xlarge", "i-0h100", "pass", "NONE"),
        ):
            body = make_receipt("ami-l4only", TWO_SHAPES, "sha256:44", verdict=verdict,
                                worst_action=action, host=host)  # fmt: skip
            repo.record_receipt(s, img, shape=shape, host=host, receipt=body)
    catalog.close()


def test_status_shows_which_validation_shapes_an_image_passed(
    catalog_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill_shapes(catalog_url)
    monkeypatch.setenv("IMAGECTL_DATABASE_URL", catalog_url)
    code, out, err = _run(capsys, "--json", "--stack", TWO_SHAPES)
    assert code == 0, err
    (entry,) = json.loads(out)["stacks"]
    assert entry["validation_shapes"] == ["g6.xlarge", "g5.xlarge"]
    (img,) = entry["candidates"]
    by_shape = {s["shape"]: s for s in img["shapes"]}
    assert by_shape["g6.xlarge"]["verdict"] == "pass"  # the newest receipt of the shape
    assert by_shape["g6.xlarge"]["host"] == "i-0l4" and by_shape["g6.xlarge"]["passed"]
    assert set(by_shape) == {"g6.xlarge", "p5.48xlarge"}
    assert img["shapes_passed"] == ["g6.xlarge", "p5.48xlarge"]
    assert img["shapes_missing"] == ["g5.xlarge"]  # the A10G fleet never ran it

    monkeypatch.setenv("COLUMNS", "250")
    code, out, _ = _run(capsys, "--stack", TWO_SHAPES)
    assert code == 0
    assert "validation shapes: g6.xlarge, g5.xlarge" in out
    assert "g6.xlarge pass" in out and "g5.xlarge missing" in out
    assert "p5.48xlarge pass (not in the stack)" in out


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The real installed entry point in a subprocess."""
    exe = Path(sys.executable).parent / "imagectl"
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, timeout=120,
        env={**os.environ, **env},
    )  # fmt: skip


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_real_cli_on_a_filled_catalog(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    _fill(url)
    done = _cli("status", "--json", env={"IMAGECTL_DATABASE_URL": url})
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["stacks"]) == 2


@pytest.mark.parametrize(
    ("make_url", "expected"),
    [
        pytest.param(
            lambda tmp: f"postgresql+psycopg://nobody@127.0.0.1:{_closed_port()}/imagectl",
            "cannot open the image catalog at postgresql+psycopg://nobody@127.0.0.1:",
            id="unreachable-postgres",
        ),
        pytest.param(
            lambda tmp: _corrupt(tmp),
            "file is not a database",
            id="corrupt-sqlite",
        ),
        pytest.param(
            lambda tmp: "not a url at all",
            "the catalog URL 'not a url at all' is not a database URL",
            id="malformed",
        ),
        pytest.param(
            lambda tmp: "mysql://u:secret@db/imagectl",
            "uses 'mysql', which imagectl does not support",
            id="unsupported",
        ),
        pytest.param(
            lambda tmp: f"sqlite:///{tmp}/missing/folder/c.db",
            "does not exist",
            id="missing-folder",
        ),
    ],
)
def test_bad_database_url_exits_2_with_a_clear_message(
    tmp_path: Path,
    make_url: object,
    expected: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("IMAGECTL_DATABASE_URL", make_url(tmp_path))  # type: ignore[operator]
    code, out, err = _run(capsys)
    assert code == 2, (out, err)
    message = " ".join(err.split())
    assert message.startswith("error: ") and expected in message
    assert "IMAGECTL_DATABASE_URL" in message
    assert "secret" not in err  # passwords are hidden


def test_real_cli_unreachable_database_no_traceback() -> None:
    url = f"postgresql+psycopg://nobody:secret@127.0.0.1:{_closed_port()}/imagectl"
    done = _cli("status", "--json", env={"IMAGECTL_DATABASE_URL": url})
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    assert "cannot open the image catalog" in " ".join(done.stderr.split())
    assert "Traceback" not in flat(done.stderr) and "secret" not in flat(done.stderr)


def _corrupt(tmp: Path) -> str:
    path = tmp / "catalog.db"
    path.write_bytes(b"this is not an sqlite file\n" * 200)
    return f"sqlite:///{path}"


def test_status_module_imports_sqlalchemy_lazily() -> None:
    code = (
        "import sys, imagectl.cli.status; "
        "bad = [m for m in sys.modules if m.startswith(('sqlalchemy', 'alembic'))]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_tables_list_at_most_limit_images(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from datetime import datetime, timedelta, timezone

    t0 = datetime(2026, 11, 1, tzinfo=timezone.utc)
    catalog = open_catalog()  # the default SQLite file in the test's state dir
    with catalog.transaction() as s:
        for n in range(3):
            repo.record_image(s, cloud_image_id=f"ami-{n}", region="us-east-1", cloud="aws",
                              stack=STACK, stack_digest="d",
                              created_at=t0 + timedelta(hours=n))  # fmt: skip
    catalog.close()
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = _run(capsys, "--limit", "2")
    assert code == 0
    assert "ami-2" in out and "ami-1" in out  # the newest two
    assert "ami-0 " not in out.split("latest events")[0]
    assert "... and 1 more candidates" in out
    # --json honours --limit as the tables do (it was ignored: all three came back), says
    # how many it left out, and without --limit lists every one
    code, out, _ = _run(capsys, "--json", "--limit", "1")
    doc = json.loads(out)
    assert code == 0 and doc["limit"] == 1
    assert [c["cloud_image_id"] for c in doc["stacks"][0]["candidates"]] == ["ami-2"]
    assert doc["stacks"][0]["hidden"] == {"candidates": 2, "blocked": 0}
    code, out, _ = _run(capsys, "--json")
    doc = json.loads(out)
    assert doc["limit"] is None and doc["stacks"][0]["hidden"]["candidates"] == 0
    assert [c["cloud_image_id"] for c in doc["stacks"][0]["candidates"]] == [
        "ami-2", "ami-1", "ami-0",
    ]  # fmt: skip
