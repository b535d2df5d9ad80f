"""The clouds: one folder per cloud (``aws``, ``gcp``, ``azure``, ``local``), each with a
``stack`` (its stack section: model, name patterns, lint's checks), a ``spec`` (what that
section means: Packer variables, provider options, build region, image scope, tag
encoding; ``spec.CloudSpec``) and a ``provider`` (``base.Provider``: images, instances,
promotion over the cloud's SDK). A cloud from another distribution registers through the
``imagectl.clouds`` entry point group (``registry``).

``registry.cloud_spec(name)`` and ``registry.get_provider(spec, options)`` are the
entry points; the SDK is imported only by ``get_provider``, so ``imagectl --help`` and
commands that never touch a cloud never import boto3, google-cloud or azure.
"""
