"""Thin kopf handlers. Each one names its trigger and hands the job to the Reconciler."""
