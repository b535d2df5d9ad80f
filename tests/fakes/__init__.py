"""Local protocol servers standing in for the Google Cloud Compute and Azure ARM APIs.

The real SDK clients (``google-cloud-compute``'s ``compute_v1`` over REST, and
``azure-mgmt-compute`` / ``azure-mgmt-network``) talk to these over HTTP, so the code
under test is the production code path. Each fake keeps its state in memory, answers in
the cloud's own wire format (camelCase JSON for Compute, ARM JSON with ``properties``),
runs long-running operations through RUNNING -> DONE / InProgress -> Succeeded as the
client polls, and takes faults through a small Python API:

- ``tests.fakes.gcp_compute.FakeGcpCompute``: images, families, deprecation, labels, IAM,
  instances, firewalls, zones, global and zone operations.
- ``tests.fakes.azure_arm.FakeAzureArm``: gallery image versions (target regions,
  replication status, exclude_from_latest, end_of_life_date), virtual machines,
  network interfaces, NSGs, public IPs, virtual networks, gallery sharing.
- ``tests.fakes.aws_faults.AwsFaults``: the same fault API for moto (AWS), injected as
  error responses at botocore's HTTP send step.

pytest fixtures wrapping them live in ``tests/fakes/fixtures.py`` (``gcp_fake``,
``azure_fake``, ``aws_moto``); a test module enables them with
``pytest_plugins = ["tests.fakes.fixtures"]`` or a conftest import.
"""
