"""The local cloud: QEMU images in a registry on disk whose "regions" are directories.

``provider`` is the registry (the Provider); ``spec`` what a stack's ``clouds.local``
means to a build (Packer's qemu builder, its disk and memory). Its instances are QEMU
VMs (``vms`` starts and stops them, ``qemu`` is the command line, ``guest_setup`` the
guest's side of a login). ``imagectl run`` (the embedded default,
``imagectl.orchestrate.run``) builds, validates and promotes into it.
"""
