"""The embedded default: the whole pipeline on one machine with QEMU (``imagectl run``).

One module per job: ``procs`` owns every child process, ``base`` makes and caches the
Debian base image with debootstrap, ``disk`` handles qcow2 files, ``accel`` probes KVM
and falls back to TCG, ``qemu`` boots a VM with SSH on a forwarded port, ``ssh`` talks
to it with a per-run key, ``faults`` injects the demonstration faults, ``progress``
shows live steps, and ``run`` ties them to the build, validation, catalog and promotion
code that the clouds use.
"""
