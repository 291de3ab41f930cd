"""Thin kopf handlers. Each one names its trigger and hands the job to the queue (queue.py),
which runs one reconcile pass (reconcile.py) at a time per job."""
