"""The GPU check: prove the validator on a real GPU host, from the offline bundle.

    python3 benchmarks/gpu_check.py --bundle FILE --out DIR --device cuda \
        --gpu H200-SXM-141GB --gpu-count 1          # or --shape p5.48xlarge
    python3 benchmarks/gpu_check.py --bundle FILE --out DIR --device cpu   # no GPU: end to end

``make gpu-check`` makes the bundle for the interpreter first (that step needs the package
index; on a host without network, make the bundle elsewhere and pass it). Run with the
Python whose torch should do the GPU work (the host's own: ``--python``, default this one).
Standard library only: imagectl itself exists on the host only inside the bundle's venv.

Steps, each timed, every output under DIR (at most six files):

1. unpack the bundle and install it offline into a fresh venv that also sees the host's
   site-packages (``install.sh --host-site-packages``): the host's torch, no index;
2. ``imagectl validate --profile quick --device D --toolkit host --json --junit``:
   ``receipt.json`` and ``junit.xml`` (``--no-hygiene``: a host, not an image; the hygiene
   checks judge image builds);
3. the collectives over every local GPU (``imagectl.validators.collectives.local``; one GPU:
   what a single rank can check): ``collectives.json``;
4. ``imagectl snapshot --load-s N``: ``snapshot.json``, for the replay test data;
5. ``figures.json`` and the printout: GEMM bf16 TFLOP/s and HBM copy GB/s, each against the
   GPU's datasheet peak (``imagectl.validators.compute.peaks``) as a ratio, the collectives, the
   receipt's verdict, and each step's wall time. ``gpu-check.log`` holds every step's output.

Exit 0 when every step ran (whatever the verdict: the figures say it), 2 when a step could
not run at all (the bundle refused, a command missing).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any


class StepFailed(Exception):
    pass


class Log:
    def __init__(self, path: Path):
        self.fh = path.open("w", encoding="utf-8")

    def step(
        self, name: str, cmd: list[str], **kw: Any
    ) -> tuple[subprocess.CompletedProcess[str], float]:
        self.fh.write(f"\n$ {' '.join(cmd)}\n")
        self.fh.flush()
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)
        wall = time.perf_counter() - t0
        self.fh.write(proc.stdout[-20000:] if "json" not in name else proc.stdout[-2000:])
        self.fh.write(proc.stderr[-20000:])
        self.fh.write(f"[{name}: exit {proc.returncode}, {wall:.1f} s]\n")
        self.fh.flush()
        print(f"{name}: exit {proc.returncode} in {wall:.1f} s", flush=True)
        return proc, wall


def figures(
    receipt: dict[str, Any], collectives: dict[str, Any], peaks: dict[str, Any]
) -> dict[str, Any]:
    """The run's figures: ``peaks`` from imagectl.validators.compute.peaks (GEMM and HBM
    against the datasheet), the verdict, what did not pass, the collectives."""
    return {
        **peaks,
        "verdict": receipt.get("verdict"),
        "worst_action": receipt.get("worst_action"),
        "summary": receipt.get("summary"),
        "toolkit": (receipt.get("coverage") or {}).get("toolkit"),
        "not_passed": [
            f"{c['id']} {c['outcome']}: {str(c.get('message'))[:160]}"
            for c in receipt.get("checks") or []
            if c.get("outcome") not in ("pass", "skip")
        ],
        "collectives": {
            "ranks": collectives.get("ranks"),
            "nccl": collectives.get("nccl"),
            "backend": collectives.get("backend"),
            "checks": {
                c["id"]: {
                    "outcome": c["outcome"],
                    "busbw_gbps": c.get("measured"),
                    "message": c.get("message"),
                }
                for c in collectives.get("checks") or []
            },
        },
    }


def _json(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _install_bundle(
    args: argparse.Namespace, work: Path, log: Log, walls: dict[str, float]
) -> tuple[str, list[str]]:
    """Unpack the bundle and install it offline into a venv that sees the host's torch."""
    with tarfile.open(args.bundle) as tar:
        tops = {m.name.split("/")[0] for m in tar.getmembers()}
        if len(tops) != 1 or any(m.name.startswith("/") or ".." in m.name.split("/") for m in tar):
            raise StepFailed(f"{args.bundle}: not an imagectl bundle (one top folder)")
        tar.extractall(work, filter="data")
    folder = work / tops.pop()
    venv = work / "venv"
    proc, walls["install"] = log.step(
        "install",
        ["sh", str(folder / "install.sh"), "--python", args.python, "--prefix", str(venv),
         "--host-site-packages"],
        env={**os.environ, "PIP_INDEX_URL": "http://127.0.0.1:9/unreachable"},
    )  # fmt: skip
    if proc.returncode != 0:
        raise StepFailed(f"the bundle did not install: {proc.stderr.strip()[-600:]}")
    return str(venv / "bin" / "python"), [str(venv / "bin" / "imagectl")]


def run(args: argparse.Namespace) -> dict[str, Any]:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    log = Log(out / "gpu-check.log")
    walls: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="imagectl-gpu-check-") as tmp:
        work = Path(tmp)
        if args.bundle is None:  # --installed: the interpreter's own imagectl
            python = args.python
            imagectl_cmd = [python, "-m", "imagectl"]
        else:
            python, imagectl_cmd = _install_bundle(args, work, log, walls)
        target = (
            ["--shape", args.shape]
            if args.shape
            else ["--gpu", args.gpu, "--gpu-count", str(args.gpu_count)]
            if args.gpu
            else []
        )
        proc, walls["validate"] = log.step(
            "validate --json",
            [*imagectl_cmd, "validate", "--profile", args.profile, "--device", args.device,
             "--toolkit", "host", "--no-hygiene", *target, "--json",
             "--junit", str(out / "junit.xml"), "-o", str(out / "receipt.json")],
        )  # fmt: skip
        if proc.returncode not in (0, 1) or not (out / "receipt.json").is_file():
            raise StepFailed(f"imagectl validate could not run: {proc.stderr.strip()[-600:]}")
        receipt = _json((out / "receipt.json").read_text(encoding="utf-8"))
        proc, _ = log.step(
            "peaks json",
            [python, "-m", "imagectl.validators.compute.peaks", str(out / "receipt.json")],
        )
        peaks = _json(proc.stdout)
        proc, walls["collectives"] = log.step(
            "collectives json",
            [python, "-m", "imagectl.validators.collectives.local",
             "--device", args.device, "--profile", args.profile,
             "-o", str(out / "collectives.json")],
        )  # fmt: skip
        collectives = _json(proc.stdout)
        snap = [*imagectl_cmd, "snapshot", "-o", str(out / "snapshot.json"),
                "--hygiene-root", str(work), "--description", args.description]  # fmt: skip
        if args.device == "cuda" and args.load_s:
            snap += ["--load-s", str(args.load_s)]
        proc, walls["snapshot"] = log.step("snapshot", snap)
        if proc.returncode != 0:
            raise StepFailed(f"imagectl snapshot failed: {proc.stderr.strip()[-600:]}")
    result = figures(receipt, collectives, peaks)
    result["device"] = args.device
    result["wall_s"] = {k: round(v, 1) for k, v in walls.items()}
    (out / "figures.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


def report(result: dict[str, Any]) -> None:
    print(
        f"verdict: {result['verdict']} (worst action {result['worst_action']}); {result['summary']}"
    )
    tk = result.get("toolkit") or {}
    print(f"toolkit: torch {tk.get('version')} CUDA {tk.get('cuda')} ({tk.get('source')})")
    for name, unit, ratio, peak in (
        ("gemm_bf16_tflops", "TFLOP/s", "gemm_ratio", "gemm_bf16_peak_tflops"),
        ("hbm_copy_gbps", "GB/s", "hbm_ratio", "hbm_peak_gbps"),
    ):
        value = result.get(name)
        if value is None:
            print(f"{name}: not measured")
        elif result.get(ratio) is not None:
            print(f"{name}: {value:.1f} {unit} = {result[ratio]:.3f} x peak {result[peak]:g}")
        else:
            print(f"{name}: {value} {unit} (no datasheet peak for this device)")
    coll = result["collectives"]
    print(f"collectives: {coll['ranks']} rank(s), backend {coll['backend']}, NCCL {coll['nccl']}")
    for cid, c in coll["checks"].items():
        print(f"  {cid}: {c['outcome']} {c['message']}")
    for line in result["not_passed"]:
        print(f"  not passed: {line}")
    print(f"wall time per step (s): {result['wall_s']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--bundle", type=Path, help="imagectl bundle's tarball")
    source.add_argument(
        "--installed", action="store_true", help="use --python's own imagectl (no bundle)"
    )
    source.add_argument(
        "--short",
        action="store_true",
        help="make bench-short: --installed --device cpu into a temporary folder",
    )
    parser.add_argument("--out", type=Path, help="folder for every output (required but --short)")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--python", default=sys.executable, help="the Python with the host's torch")
    parser.add_argument("--profile", choices=["quick", "full"], default="quick")
    parser.add_argument("--gpu", help="GPU SKU (images/compat/gpus.yaml), with --gpu-count")
    parser.add_argument("--gpu-count", type=int, default=1)
    parser.add_argument("--shape", help="a catalog shape instead of --gpu")
    parser.add_argument("--load-s", type=float, default=10.0, help="snapshot's load (cuda)")
    parser.add_argument("--description", default="imagectl GPU check")
    args = parser.parse_args(argv)
    if args.short:
        args.device, args.installed = "cpu", True
        if args.out is None:
            args.out = Path(tempfile.mkdtemp(prefix="imagectl-gpu-check-short-"))
    if args.out is None:
        parser.error("--out DIR is required")
    if args.device == "cpu" and not (args.shape or args.gpu):
        args.shape = "qemu-tcg"  # the catalog's shape without GPUs
    if args.device == "cuda" and not (args.shape or args.gpu):
        parser.error("--device cuda needs --gpu SKU --gpu-count N or --shape SHAPE")
    if shutil.which(args.python) is None and not Path(args.python).is_file():
        parser.error(f"--python {args.python}: no such interpreter")
    t0 = time.perf_counter()
    try:
        result = run(args)
    except (StepFailed, tarfile.TarError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report(result)
    print(f"gpu check: {time.perf_counter() - t0:.1f} s in all; outputs in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
