"""AWS (boto3): AMIs, EC2 instances, SSM parameters as the "latest" pointer.

``clients`` builds sessions and clients (endpoint override, retry mode, credentials from
boto3's default chain only); ``errors`` maps EC2 error codes onto CapacityError /
QuotaError; ``network`` owns the per-run security group; ``provider`` is the Provider;
``spec`` what a stack's ``clouds.aws`` means (``imagectl.clouds.spec``).
"""
