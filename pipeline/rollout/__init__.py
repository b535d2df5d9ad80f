"""Fleet health closes the loop: a canary pointer beside "latest"
(``canary``), the fleet's node series read from Prometheus (``prom``, ``fleet``), a stated
decision rule with its thresholds as data (``decide``, ``stats``, ``policy.yaml``), and
``rollout()`` (``run``), which records each decision and advances, holds or rolls back."""
