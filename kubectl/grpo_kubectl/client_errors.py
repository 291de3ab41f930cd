"""The Python client's errors: one class the caller catches, and the few worth telling apart.

They derive from the plugin's `PluginError` so that `kubectl grpo`, which shares the client's
pieces, reports them the same way; the client turns every `PluginError` of those pieces into a
`GRPOClientError`, so `except GRPOClientError` catches all of them and a traceback names the
class the documentation names.
"""

from __future__ import annotations

from .cluster import PluginError


class GRPOClientError(PluginError):
    """Every error of the client: one line, the thing to change."""


class JobRefusedError(GRPOClientError):
    """The API server refused the job (its schema or CEL rules): the message names the field."""


class JobFailedError(GRPOClientError):
    """The job failed while `wait` waited for something else."""


class JobFinishedError(GRPOClientError):
    """The job succeeded without reaching what `wait` waited for, which it never will now."""


class WaitTimeoutError(GRPOClientError):
    """`wait` gave up before the job got there."""
