"""Multi-node: the hostfile, and two local "nodes" meeting through torchrun's c10d rendezvous."""

from __future__ import annotations

import os
import tempfile
import threading
import types

import pytest

from imagectl.core.errors import UserError
from imagectl.validators.collectives import collective_checks
from imagectl.validators.collectives.hostfile import DEFAULT_PORT, parse_hostfile
from imagectl.validators.collectives.launch import free_port
from imagectl.validators.results import Outcome


def test_hostfile_format(tmp_path):
    path = tmp_path / "hosts"
    path.write_text("# two p5\n10.0.0.11 slots=8 port=29500\n\n10.0.0.12 slots=8  # second\n")
    hf = parse_hostfile(str(path))
    assert hf.hosts == ("10.0.0.11", "10.0.0.12")
    assert hf.slots == 8 and hf.nnodes == 2 and hf.endpoint == "10.0.0.11:29500"
    path.write_text("a\nb\n")
    assert parse_hostfile(str(path)).port == DEFAULT_PORT
    assert parse_hostfile(str(path)).slots is None


@pytest.mark.parametrize(
    ("text", "where", "words"),
    [
        ("a slots=8\nb slots=x\n", ":2", "malformed option"),
        ("a\nb port=1\n", ":2", "only allowed on the first line"),
        ("a slots=8\nb slots=4\n", "", "different slot counts"),
        ("# nothing\n", "", "lists no host"),
    ],
)
def test_hostfile_errors_name_the_line(tmp_path, text, where, words):
    path = tmp_path / "hosts"
    path.write_text(text)
    with pytest.raises(UserError) as err:
        parse_hostfile(str(path))
    assert f"{path}{where}" in str(err.value) and words in str(err.value)


def test_missing_hostfile_is_bad_input(tmp_path):
    with pytest.raises(UserError, match="cannot read the hostfile"):
        collective_checks(
            types.SimpleNamespace(), device="cpu", profile="quick", nodes=str(tmp_path / "x")
        )


@pytest.mark.slow
def test_two_nodes_through_torchrun_c10d(tmp_path, monkeypatch):
    if os.environ.get("CI") != "true":
        pytest.importorskip("torch")
    # Our temporary folder, for the launcher and the agents it starts: what a run leaves
    # there is left on every fleet node at every boot.
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    hosts = tmp_path / "hosts"
    hosts.write_text(f"127.0.0.1 slots=1 port={free_port()}\n127.0.0.1 slots=1\n")
    results: dict[int, list] = {}

    def node(i: int) -> None:
        results[i] = collective_checks(
            types.SimpleNamespace(),
            device="cpu",
            profile="quick",
            nodes=str(hosts),
            ops=["all_reduce", "all_gather"],
            sizes=[4096],
            join_timeout_s=60,
            op_timeout_s=60,
        )

    threads = [threading.Thread(target=node, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    seen_ranks = set()
    for checks in results.values():
        by_id = {c.id: c for c in checks}
        rdzv = by_id["collective.rendezvous"]
        assert rdzv.outcome is Outcome.PASS, rdzv.message
        assert rdzv.details["world_size"] == 2
        (local,) = rdzv.details["local_ranks"]  # each node runs one of the two ranks
        seen_ranks.add(local)
        for op in ("all_reduce", "all_gather"):
            check = by_id[f"collective.{op}"]
            assert check.outcome is Outcome.PASS, check.message
            assert check.details["world_size"] == 2 and check.details["sizes"][0]["ok"]
    assert seen_ranks == {0, 1}
    assert sorted(p.name for p in scratch.iterdir()) == []  # no torchelastic_*, no run folder


# What torchrun's agent printed in real failed runs (torch 2.13): a c10d warning line
# from socket.cpp, a Python exception with the C++ frames torch appends after it.
AGENT_UNREACHABLE = (
    "[W1126 17:15:53.912756790 socket.cpp:764] [c10d] The client socket has failed to "
    "connect to [::ffff:192.0.2.7]:55873 (errno: 113 - No route to host).\n"
)
AGENT_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/opt/imagectl/lib/python3.11/site-packages/torch/distributed/run.py", line 7\n'
    "torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
    "network address. port: 29511, useIpv6: false, code: -99, name: EADDRNOTAVAIL, message: "
    "cannot assign requested address\n"
    "Exception raised from run at /__w/pytorch/pytorch/torch/csrc/distributed/c10d/"
    "socket.cpp:820 (most recent call first):\n"
    "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 (0x7f in libc10.so)\n"
    "frame #2: c10::DistNetworkError::DistNetworkError(c10::SourceLocation) + 0x72 (0x7f)\n"
)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (AGENT_UNREACHABLE, "failed to connect to [::ffff:192.0.2.7]:55873 (errno: 113"),
        (AGENT_TRACEBACK, "DistNetworkError: The server socket has failed to listen"),
        ("W1126 agent started\nall fine\n", ""),
    ],
)
def test_the_launchers_own_reason_is_its_last_error_line(text, said):
    from imagectl.validators.collectives.launch import last_error_line

    line = last_error_line(text)
    assert (said in line) if said else line == ""
    assert not line.startswith("frame #") and len(line) <= 300


@pytest.mark.slow
def test_a_rendezvous_that_cannot_complete_says_what_the_agent_said(tmp_path):
    """A node whose rendezvous host is unreachable (TEST-NET-1, RFC 5737): the failure
    carries torchrun's own reason, which the receipt had dropped (the two-guest run of
    2026-11-26 ended with only "the launcher exited before every rank finished")."""
    if os.environ.get("CI") != "true":
        pytest.importorskip("torch")
    from imagectl.validators.collectives.launch import Plan, run_collectives

    hosts = tmp_path / "hosts"
    hosts.write_text(f"192.0.2.7 slots=1 port={free_port()}\n127.0.0.1 slots=1\n")
    plan = Plan(
        device="cpu", ops=["all_reduce"], sizes={"all_reduce": [4096]}, nranks=1,
        start_timeout_s=15, nodes=parse_hostfile(str(hosts)), local_addr="127.0.0.1",
    )  # fmt: skip
    report = run_collectives(plan)
    assert report.failure is not None and report.failure.kind == "rendezvous"
    assert "192.0.2.7" in report.failure.message
    assert "; agent: " in report.failure.message, report.stderr_tail
