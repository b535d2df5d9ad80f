"""The local build's machinery on one machine (``imagectl.building.local`` calls it).

One module per job: ``procs`` owns every child process, ``base`` makes and caches the
Debian base image with debootstrap, ``provision`` and ``chroot`` run site.yml natively,
``candidate`` runs Packer's qemu pass and keeps candidates by their inputs, ``disk``
handles qcow2 files, ``accel`` probes KVM and falls back to TCG, ``faults`` injects the
demonstration faults, ``progress`` shows live steps. ``imagectl run`` itself is
``imagectl.orchestrate.run``; the local cloud's VMs are ``imagectl.clouds.local``.
"""

# The demonstration faults (``faults``), named here so that the CLI's choices need not
# import the module that injects them.
FAULTS = ("unheld-package", "ssh-host-key")
