"""The local cloud: QEMU images in a registry on disk whose "regions" are directories.

``provider`` is the registry (the Provider); ``spec`` what a stack's ``clouds.local``
means to a build (Packer's qemu builder, its disk and memory). ``imagectl run`` (the
embedded default, ``imagectl.embedded``) builds and promotes into it.
"""
