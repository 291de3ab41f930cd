"""`kubectl grpo`: see and steer GRPOJobs from a workstation (installed as `kubectl-grpo`)."""
