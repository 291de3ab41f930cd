"""Test-suite access to a real Kubernetes cluster: backends, kubectl helpers, the fake Ray job API."""
