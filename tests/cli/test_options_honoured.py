"""No option is silently dropped: every option ``imagectl validate`` accepts either changes
the result or is refused with exit 2 naming what it conflicts with, against a replay
(tests/snapshots/healthy/h200-8x.json, which records the image's own expect.json and so a
shape) and on this machine's live path (no GPU). ``CASES`` lists every option of the
command: a new option fails ``test_every_option_has_a_case`` until it says what it does.

Before, ``validate --replay healthy/h200-8x.json --gpu B200 --gpu-count 4`` passed, judged
as the recorded 8x H200 (``--gpu`` was dropped where the snapshot recorded a shape), and
``--nodes``, ``--device``, ``--toolkit host``, ``--max-regression-pct`` and ``--all`` were
taken and ignored where they could not act."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pytest

from imagectl.cli import cli as imagectl_cli
from tests.cli.hints import REPO, parse
from tests.support import CliText

SNAPSHOTS = REPO / "tests" / "snapshots"
REPLAY = str(SNAPSHOTS / "healthy" / "h200-8x.json")
EXPECT = str(SNAPSHOTS / "expect" / "h100-sxm-8x.json")


def flat(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    # "changes": the receipt differs from the run without it; "refused": exit 2 naming
    # `names`; "said": the run is the same and stderr says why; "writes": a file appears
    kind: str
    names: tuple[str, ...] = ()
    live: bool = False  # on this machine's live path instead of the replay
    also: tuple[str, ...] = ()  # in both runs, the one with the option and the one without


def _cases(tmp: Path) -> dict[str, list[Case]]:
    receipt = tmp / "r.json"
    return {
        "profile": [Case(("--profile", "quick"), "changes")],
        "stack": [Case(("--stack", "h100-training", "--shape", "p5.48xlarge"), "changes")],
        "expect_file": [Case(("--expect", EXPECT), "changes")],
        "shape": [Case(("--shape", "p5en.48xlarge"), "changes")],
        "gpu": [
            Case(("--gpu", "B200", "--gpu-count", "4"), "changes"),
            Case(("--gpu", "NVIDIA H200", "--gpu-count", "4"), "changes"),
            Case(("--gpu", "H100", "--gpu-count", "8"), "refused", ("H100-SXM-80GB",)),
            Case(("--gpu", "B200"), "refused", ("--gpu-count",)),
        ],
        "gpu_count": [Case(("--gpu", "H200-SXM-141GB", "--gpu-count", "2"), "changes")],
        "replay": [Case(("--shape", "p5en.48xlarge"), "changes")],  # every case replays
        "kernel_log": [Case(("--kernel-log", str(tmp / "kernel.log")), "changes")],
        "history_dir": [
            Case(
                ("--history", str(tmp / "boots")),
                "changes",
                also=("--kernel-log", str(tmp / "kernel.log")),
            )
        ],
        "image_id": [Case(("--image-id", "ami-0aaaaaaaaaaaaaaaa"), "changes")],
        "hygiene_root": [
            Case(("--hygiene-root", str(tmp)), "said", ("is not read: on a replay",)),
            Case(
                ("--hygiene-root", str(tmp), "--no-hygiene"),
                "said",
                ("is not read: --no-hy",),
                also=("--no-hygiene",),
            ),
            Case(("--hygiene-root", str(tmp)), "changes", live=True),
        ],
        "hygiene": [Case(("--no-hygiene",), "changes")],
        "device": [
            Case(("--device", "cpu"), "refused", ("--device", "--profile boot")),
            Case(("--device", "cpu", "--profile", "quick"), "changes"),
            Case(("--device", "cpu"), "refused", ("--device", "--profile boot"), live=True),
        ],
        "nodes": [
            Case(
                ("--nodes", str(REPO / "pyproject.toml"), "--profile", "quick"),
                "refused",
                ("--nodes", "--replay"),
            ),
            Case(
                ("--nodes", str(REPO / "pyproject.toml")), "refused", ("--nodes", "boot"), live=True
            ),
        ],
        "baseline": [Case(("--baseline", str(receipt)), "changes")],
        "max_regression_pct": [
            Case(("--max-regression-pct", "1"), "refused", ("--max-regression-pct", "--baseline"))
        ],
        "sandbox": [Case(("--sandbox",), "changes")],
        "toolkit_wheelhouse": [
            Case(
                ("--toolkit-wheelhouse", str(tmp / "t.tar"), "--toolkit", "host"),
                "refused",
                ("--toolkit-wheelhouse", "--toolkit host"),
            )
        ],
        "toolkit": [
            Case(("--toolkit", "host"), "refused", ("--toolkit host", "--profile boot")),
            Case(("--toolkit", "host", "--profile", "quick"), "changes"),
        ],
        "as_json": [Case((), "changes")],  # every case compares its --json
        "show_all": [Case(("--all",), "refused", ("--all", "--json"))],
        "junit": [Case(("--junit", str(tmp / "j.xml")), "writes", (str(tmp / "j.xml"),))],
        "prometheus": [
            Case(("--prometheus", str(tmp / "m.prom")), "writes", (str(tmp / "m.prom"),))
        ],
        "output": [Case(("-o", str(tmp / "o.json")), "writes", (str(tmp / "o.json"),))],
    }


def _normal(receipt: dict[str, Any]) -> dict[str, Any]:
    """A receipt without what differs between two runs of the same thing (timings, which
    depend on the machine's load)."""
    out = {k: v for k, v in receipt.items() if k not in ("started_at", "finished_at")}
    out.pop("duration_s", None)
    out["host"] = {k: v for k, v in receipt["host"].items() if not k.endswith("_s")}
    out["checks"] = [_untimed(c) for c in receipt["checks"]]
    return out


def _untimed(check: dict[str, Any]) -> dict[str, Any]:
    """A check without its run's timings: its duration, and a measurement in seconds (how
    long NVML took to enumerate: '8 GPU(s) in 1 ms' one run, '... in 0 ms' the next)."""
    out = {k: v for k, v in check.items() if k != "duration_s"}
    if out.get("unit") == "s":
        out.pop("measured", None)
        out.pop("message", None)
    return out


def test_every_option_has_a_case(tmp_path: Path) -> None:
    validate = imagectl_cli.get_command(click.Context(imagectl_cli), "validate")
    assert validate is not None
    options = {p.name for p in validate.params if p.name != "help"}
    assert set(_cases(tmp_path)) == options


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The run without the option, replayed and live, and the files the cases read."""
    from imagectl.cli import main

    tmp = tmp_path_factory.mktemp("options")
    (tmp / "kernel.log").write_text(
        "[  12.5] NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus.\n"
    )
    boots = tmp / "boots"
    boots.mkdir()
    previous = boots / "previous.json"  # the same Xid in the boot before (another boot id)
    main(["validate", "--replay", REPLAY, "--kernel-log", str(tmp / "kernel.log"),
          "-o", str(previous)])  # fmt: skip
    doc = json.loads(previous.read_text())
    doc["host"]["boot"]["boot_id"] = "00000000-0000-4000-8000-000000000001"
    previous.write_text(json.dumps(doc))
    assert main(["validate", "--replay", REPLAY, "-o", str(tmp / "r.json")]) == 0
    return {"tmp": tmp}


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from imagectl.cli import main

    capsys.readouterr()
    code = main(["validate", *args])
    got = capsys.readouterr()
    return code, CliText(got.out), CliText(got.err)


ALL = [(name, i) for name, cases in _cases(Path("/t")).items() for i in range(len(cases))]


@pytest.mark.parametrize(("name", "index"), ALL, ids=[f"{n}-{i}" for n, i in ALL])
def test_each_option_changes_the_result_or_is_refused(
    name: str, index: int, runs: dict[str, Any], capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    tmp: Path = runs["tmp"]
    case = _cases(tmp)[name][index]
    monkeypatch.chdir(tmp)
    monkeypatch.setenv("IMAGECTL_ROOT", str(REPO))
    front = (*(() if case.live else ("--replay", REPLAY)), *case.also)
    argv = [*front, *case.args]
    parse(["validate", *argv])  # what the case types is a command line that parses
    if case.kind == "refused":
        code, out, err = _run(capsys, *argv, "--json")
        assert code == 2, (code, err[-2000:])
        for word in case.names:
            assert word in flat(err), (word, err)
        assert out == "" and "Traceback" not in err
        return
    _, base_out, _ = _run(capsys, *front, "--json")
    code, out, err = _run(capsys, *argv, "--json")
    assert code in (0, 1), (code, err[-2000:])
    assert "Traceback" not in err
    if case.kind == "writes":
        for path in case.names:
            assert Path(path).is_file() and Path(path).stat().st_size > 0, path
        return
    before, after = _normal(json.loads(base_out)), _normal(json.loads(out))
    if case.kind == "said":
        assert after == before
        for word in case.names:
            assert word in flat(err), (word, err)
        return
    if name == "as_json":  # --json itself: the table is not the JSON
        code, table, _ = _run(capsys, *front)
        assert table.strip() and not table.lstrip().startswith("{")
        return
    assert after != before, f"{case.args} changed nothing"


def test_gpu_on_a_replay_that_recorded_a_shape_is_honoured(capsys) -> None:
    code, out, err = _run(capsys, "--replay", REPLAY, "--gpu", "B200", "--gpu-count", "4",
                          "--json")  # fmt: skip
    receipt = json.loads(out)
    assert code == 1, err
    judged = receipt["expectations"]
    assert (judged["gpu"], judged["gpu_count"], receipt["verdict"]) == ("B200", 4, "fail")
    assert receipt["expectations"]["shape"] is None
    assert "gpu:B200x4" in receipt["expectations"]["origin"]
    # nvidia-smi's name, as `imagectl compat check --gpu` takes it (one name table)
    code, out, err = _run(capsys, "--replay", REPLAY, "--gpu", "NVIDIA H200", "--gpu-count", "8",
                          "--json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["expectations"]["gpu"] == "H200-SXM-141GB"


def test_no_expectations_names_gpu_and_gpu_count(tmp_path: Path, capsys) -> None:
    snap = json.loads(Path(REPLAY).read_text())
    del snap["host"]["expect_file"]
    path = tmp_path / "no-expect.json"
    path.write_text(json.dumps(snap))
    code, out, err = _run(capsys, "--replay", str(path))
    assert code == 2 and out == ""
    assert "--gpu/--gpu-count" in flat(err) and "--gpu MODEL --gpu-count N" in flat(err)
    code, out, err = _run(capsys, "--replay", str(path), "--gpu", "nvidia h200", "--gpu-count",
                          "8", "--json")  # fmt: skip
    assert code == 0, err


def test_snapshot_load_without_gpus_is_refused_before_capturing(tmp_path: Path, capsys) -> None:
    """``snapshot --load-s`` where NVML cannot be read ended in NVML's traceback (exit 1)."""
    from imagectl.cli import main

    if Path("/proc/driver/nvidia/version").exists():
        pytest.skip("this machine has an NVIDIA driver loaded")
    out = tmp_path / "s.json"
    code = main(["snapshot", "-o", str(out), "--no-nccl-probe", "--load-s", "2"])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert "--load-s runs GEMMs" in flat(err) and "NVML cannot be read here" in flat(err)
    assert "Traceback" not in flat(err)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("ami-0123456789abcdef0", "--valid-hours", "5"), "--valid-hours"),
        (("--export-trust", "--export-revocations"), "--export-trust and --export-revocations"),
        (("ami-0123456789abcdef0", "--export-trust"), "IMAGE is not read by --export-trust"),
        (("--export-revocations", "--json"), "--json is not read by --export-revocations"),
        (("ami-0123456789abcdef0", "--export-envelope", "--json"), "--json is not read by"),
    ],
)
def test_verify_refuses_what_its_mode_does_not_read(args, named: str, capsys) -> None:
    """``verify`` took ``--valid-hours`` without ``--export-revocations``, an IMAGE with
    ``--export-trust``, and several exports at once, and dropped all but one."""
    from imagectl.cli import main

    code = main(["verify", *args])
    got = capsys.readouterr()
    assert code == 2 and got.out == ""
    assert named in flat(got.err)


# options a command takes and does not read, each with why
UNREAD = {("collectives", "as_json"): "its output is always JSON (the fan-out reads it)"}


def test_every_option_of_every_command_is_read_by_it() -> None:
    """The whole class, statically: each option of each command (through the registry) is
    read by the command's own function; one it never reads would be dropped whatever the
    run (``--deadline`` is read by the registry's wrapper)."""
    import ast
    import inspect
    import textwrap

    top = click.Context(imagectl_cli)
    unread, seen = [], 0
    for name in sorted(imagectl_cli.list_commands(top)):
        cmd = imagectl_cli.get_command(top, name)
        assert cmd is not None
        subs = cmd.commands.items() if isinstance(cmd, click.Group) else [("", cmd)]
        for sub, c in subs:
            assert c.callback is not None
            body = ast.parse(textwrap.dedent(inspect.getsource(inspect.unwrap(c.callback))))
            names = {n.id for n in ast.walk(body) if isinstance(n, ast.Name)}
            names |= {n.value for n in ast.walk(body) if isinstance(n, ast.Constant)}
            full = f"{name} {sub}".strip()
            for p in c.params:
                seen += 1
                if p.name not in (*names, "help", "deadline") and (full, p.name) not in UNREAD:
                    unread.append(f"{full} {p.opts[0] if p.opts else p.name}")
    assert seen > 150 and unread == []
