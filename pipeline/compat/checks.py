"""One evaluator per compatibility rule id. Each yields zero or more violations."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from imagectl.compat.combination import Combination, Violation, violation
from imagectl.compat.data import CompatData, Rule, ToolkitVariant
from imagectl.core.versions import Dotted, NcclVersion, driver_branch

Evaluator = Callable[[Combination, CompatData, Rule], Iterator[Violation]]
EVALUATORS: dict[str, Evaluator] = {}


def rule(rule_id: str) -> Callable[[Evaluator], Evaluator]:
    def register(fn: Evaluator) -> Evaluator:
        EVALUATORS[rule_id] = fn
        return fn

    return register


def _driver(c: Combination) -> Dotted:
    return Dotted.parse(c.driver, what="driver version")


@rule("CUDA-DRIVER-MIN")
def cuda_driver_min(c: Combination, d: CompatData, r: Rule) -> Iterator[Violation]:
    _, minimum = d.cuda_entry(c.cuda)
    if _driver(c) < minimum:
        yield violation(r, cuda=c.cuda, min_driver=minimum, driver=c.driver)


@rule("FM-EQUALS-DRIVER")
def fm_equals_driver(c: Combination, d: CompatData, r: Rule) -> Iterator[Violation]:
    if c.fabric_manager is None:
        return
    fm = Dotted.parse(c.fabric_manager, what="fabric manager version")
    if fm != _driver(c) or fm.text != c.driver:
        yield violation(r, fabric_manager=c.fabric_manager, driver=c.driver)


def _needs_fabric(c: Combination, d: CompatData) -> list[str]:
    return [g for g in c.gpus if d.gpu(g).nvswitch]


@rule("FM-REQUIRED")
def fm_required(c: Combination, d: CompatData, r: Rule) -> Iterator[Violation]:
    if c.fabric_manager_mode != "none":
        return
    for gpu in _needs_fabric(c, d):
        yield violation(r, gpu=gpu)


@rule("FM-UNNEEDED")
def fm_unneeded(c: Combination, d: CompatData, r: Rule) -> Iterator[Violation]:
    wants = c.fabric_manager_mode == "required" or (
        c.fabric_manager is not None and c.fabric_manager_mode == "auto"
    )
    if wants and c.gpus and not _needs_fabric(c, d):
        yield violation(r, gpus=", ".join(c.gpus))


@rule("MODULES-OPEN-MIN-BRANCH")
def modules_open_min(c: Combination, d: CompatData, r: Rule) -> Iterator[Violation]:
    branch = driver_branch(c.driver)
    if c.kernel_modules == "open" and branch < int(r.params["min_branch"]):
        yield violation(r, branch=branch)


@rule("MODULES-ARCH")
def modules_arch(c: Combination, d: CompatData, r: Rule) -> Iterator[Violation]:
    if c.kernel_modules is None:
        return
    for sku in c.gpus:
        gpu = d.gpu(sku)
        if c.kernel_modules not in gpu.arch.kernel_modules:
            yield violation(
                r,
                gpu=sku,
                arch=gpu.arch.name,
                allowed=" or ".join(gpu.arch.kernel_modules),
                kernel_modules=c.kernel_modules,
            )


@rule("GPU-MIN-BRANCH")
def gpu_min_branch(c: Combination, d: CompatData, r: Rule) -> Iterator[Violation]:
    branch = driver_branch(c.driver)
    for sku in c.gpus:
        gpu = d.gpu(sku)
        if gpu.min_branch is not None and branch < gpu.min_branch:
            yield violation(r, gpu=sku, min_branch=gpu.min_branch, branch=branch)


@rule("NCCL-CUDA-MAJOR")
def nccl_cuda_major(c: Combination, d: CompatData, r: Rule) -> Iterator[Violation]:
    if c.nccl is None:
        return
    nccl = NcclVersion.parse(c.nccl)
    cuda = Dotted.parse(c.cuda, what="CUDA version")
    if nccl.cuda.major != cuda.major:
        yield violation(
            r,
            nccl=c.nccl,
            nccl_cuda=nccl.cuda,
            cuda=c.cuda,
            cuda_major=cuda.major,
            cuda_major_minor=f"{cuda.major}.{cuda.minor}",
            nccl_version=nccl.version,
        )


@rule("CUDA-ARCH-DROPPED")
def cuda_arch_dropped(c: Combination, d: CompatData, r: Rule) -> Iterator[Violation]:
    major = Dotted.parse(c.cuda, what="CUDA version").major
    for sku in c.gpus:
        gpu = d.gpu(sku)
        last = gpu.arch.last_cuda_major
        if last is not None and major > last:
            yield violation(r, cuda=c.cuda, arch=gpu.arch.name, gpu=sku, last_cuda_major=last)


def _branch_facts(c: Combination, d: CompatData) -> tuple[int, int | None]:
    branch = driver_branch(c.driver)
    info = d.branches.get(branch)
    if info is None:
        return branch, None
    return branch, (info.end_of_life - c.as_of).days


@rule("BRANCH-EOL")
def branch_eol(c: Combination, d: CompatData, r: Rule) -> Iterator[Violation]:
    branch, days = _branch_facts(c, d)
    if days is not None and days < 0:
        info = d.branches[branch]
        yield violation(
            r, branch=branch, designation=info.designation, end_of_life=info.end_of_life
        )


@rule("BRANCH-EOL-SOON")
def branch_eol_soon(c: Combination, d: CompatData, r: Rule) -> Iterator[Violation]:
    branch, days = _branch_facts(c, d)
    if days is not None and 0 <= days <= d.branch_warn_days:
        info = d.branches[branch]
        yield violation(
            r,
            branch=branch,
            designation=info.designation,
            end_of_life=info.end_of_life,
            days_left=days,
        )


@rule("BRANCH-UNKNOWN")
def branch_unknown(c: Combination, d: CompatData, r: Rule) -> Iterator[Violation]:
    branch = driver_branch(c.driver)
    if branch not in d.branches:
        yield violation(r, branch=branch)


def toolkit_variant(cuda: str) -> str:
    """'12.8' -> 'cu128' (PyTorch's variant names)."""
    major, minor = [*cuda.split("."), "0"][:2]
    return f"cu{major}{minor}"


def _toolkit(c: Combination, d: CompatData) -> tuple[str, str, ToolkitVariant | None] | None:
    if not (c.toolkit_torch and c.toolkit_cuda):
        return None
    variant = toolkit_variant(c.toolkit_cuda)
    return c.toolkit_torch, variant, d.toolkit(c.toolkit_torch, variant)


@rule("TOOLKIT-VARIANT-KNOWN")
def toolkit_known(c: Combination, d: CompatData, r: Rule) -> Iterator[Violation]:
    tk = _toolkit(c, d)
    if tk and tk[2] is None:
        known = sorted(d.toolkits.get(tk[0], {})) or [f"no release {tk[0]} in the table"]
        yield violation(r, torch=tk[0], variant=tk[1], known=", ".join(known))


@rule("TOOLKIT-CUDA-DRIVER")
def toolkit_cuda_driver(c: Combination, d: CompatData, r: Rule) -> Iterator[Violation]:
    tk = _toolkit(c, d)
    if not tk or tk[2] is None:
        return
    _, minimum = d.cuda_entry(tk[2].cuda_runtime)
    if _driver(c) < minimum:
        yield violation(
            r,
            torch=tk[0],
            variant=tk[1],
            cuda_runtime=tk[2].cuda_runtime,
            min_driver=minimum,
            driver=c.driver,
        )


@rule("TOOLKIT-CUDA-MAJOR")
def toolkit_cuda_major(c: Combination, d: CompatData, r: Rule) -> Iterator[Violation]:
    if not c.toolkit_cuda:
        return
    toolkit_major = Dotted.parse(c.toolkit_cuda, what="toolkit CUDA").parts[0]
    cuda_major = Dotted.parse(c.cuda, what="CUDA version").parts[0]
    if toolkit_major != cuda_major:
        yield violation(
            r,
            toolkit_major=toolkit_major,
            variant=toolkit_variant(c.toolkit_cuda),
            cuda=c.cuda,
            cuda_major=cuda_major,
        )


@rule("TOOLKIT-MISSING")
def toolkit_missing(c: Combination, d: CompatData, r: Rule) -> Iterator[Violation]:
    needs = c.profile in ("quick", "full", "burn") and bool(c.gpus)
    if needs and not c.toolkit_torch:
        yield violation(r, profile=c.profile, gpus=", ".join(c.gpus))


@rule("AZURE-SECURE-BOOT-DKMS")
def azure_secure_boot_dkms(c: Combination, d: CompatData, r: Rule) -> Iterator[Violation]:
    # every driver source installs DKMS-built modules (playbooks/roles/nvidia_driver)
    if c.azure_security_type == "TrustedLaunch":
        yield violation(
            r, security_type=c.azure_security_type, kernel_modules=c.kernel_modules or "kernel"
        )


@rule("AZURE-SECURE-BOOT-OPTIONAL")
def azure_secure_boot_optional(c: Combination, d: CompatData, r: Rule) -> Iterator[Violation]:
    if c.azure_security_type == "TrustedLaunchSupported":
        yield violation(r)
