"""The GPU fabric on one host: EFA or InfiniBand NICs, the NCCL net NCCL loads, GPUDirect
RDMA and the GPU-NIC topology.

``model.py`` is the snapshot's ``fabric`` section (what was read, as read); ``capture.py``
reads it on a live host (``/sys/class/infiniband``, ``/sys/bus/pci``, ``/sys/module``,
``fi_info -p efa``, a tiny NCCL run with ``NCCL_DEBUG=INFO``: ``nccl_probe.py``);
``parse.py`` and ``topology.py`` interpret it the same way live and replayed;
``policy.py`` loads ``data/fabric.yaml``. The checks are ``checks/fabric_efa.py``,
``checks/fabric_ib.py``, ``checks/fabric_nccl.py`` and ``checks/topology.py``.
"""
