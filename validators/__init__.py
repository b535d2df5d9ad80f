"""Host validator: runs on the GPU machine being judged."""
