"""Test support shared by every tier: the cluster backend, the fake job API client, the chart,
the operator process, jobs and examples. Tests import it as `support.<module>`."""
