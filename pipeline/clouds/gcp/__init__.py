"""Google Cloud (google-cloud-compute over REST): images, families, instances.

``clients`` is the one client factory (endpoint override, anonymous credentials only for
a local endpoint, retries, explicit operation waits); ``labels`` maps imagectl's tag
keys onto GCP label rules; ``provider`` is the Provider; ``spec`` what a stack's
``clouds.gcp`` means (``imagectl.clouds.spec``).
"""
