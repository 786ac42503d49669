"""A job whose device is not where it would run: what runs on this machine instead, said first (a CUDA job on
a machine without a GPU runs its torch code on the CPU with device=torch_cpu; with a GPU here, Modal's jobs
run on it offline), then how to reach a GPU elsewhere."""

from __future__ import annotations

import shutil
from typing import Any, Optional

from hydra_plugins.sweep_launcher.api import command, this_command
from sweep.preflight.refusal import Refusal

OFFLINE = "hydra.launcher.modal.offline=true"  # the launcher's switch: Modal's jobs on this machine's workers


def gpu_here() -> bool:
    import torch  # noqa: PLC0415 - torch: seconds to import, only for a job that wants a GPU

    return bool(torch.cuda.is_available())


def on_this_cpu() -> str:
    """The same torch code on this machine's CPU: the command to run (this one, with device=torch_cpu)."""
    # (a CUDA device named on the command line goes too: `device.torch_device=cuda:1` kept, the hint failed again)
    here = this_command("device=torch_cpu", drop=("device.torch_device",))
    return f"device=torch_cpu runs the same torch code on this CPU: {here}"


def modal_setup() -> str:
    """How to give Modal a token (its CLI beside this interpreter)."""
    return f"`{command('modal', 'token', 'new')}`"


def without_gpu(sweep: bool) -> str:
    """After `... needs a CUDA GPU and this machine has none`: what runs here, then the way to a GPU on Modal."""
    modal = (
        "run it on the sweep launcher (not offline, device.local_gpu=false)" if sweep else "add -m (a sweep sends it)"
    )
    return f"{on_this_cpu()}; for a GPU on Modal, {modal} once Modal has a token ({modal_setup()})"


def instead_of_modal(device: Any) -> Optional[str]:
    """A job placed on Modal that Modal cannot take here (no token): what runs it on this machine instead; None
    for a job that is not a CUDA job (the launcher's own advice)."""
    cuda = isinstance(device, dict) and str(device.get("torch_device", "")).startswith("cuda")
    if not cuda or device.get("backend") != "torch":
        return None
    if gpu_here():
        return f"this machine's GPU runs them without Modal: {this_command(OFFLINE)}"
    return f"this machine has no GPU: {on_this_cpu()}"


def check_slurm_here(launcher: str) -> None:
    """`hydra/launcher=submitit_slurm` where SLURM is not: submitit's 40-line traceback ('Could not detect "srun"')
    after a parent run opened and closed FINISHED with "0 job(s) finished". Refused first, as a cuda job on a
    machine without a GPU is."""
    if "slurm" in launcher and shutil.which("srun") is None:
        raise Refusal(
            f"hydra/launcher={launcher} submits to SLURM, and this machine has no SLURM (no srun on PATH): run the "
            "command on the cluster's login node (docs/launchers.md: a cluster), or here with hydra/launcher=local"
        )
