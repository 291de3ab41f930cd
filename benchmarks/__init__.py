"""The benchmarks: each module runs as `python -m benchmarks.<module>` from the repository root.

They import the product's own names (metric keys from `grpo_trainer.metric_keys`, the metrics
files' layout from `grpo_operator.api.contract`, GRPOJobs from `examples/`) instead of spelling
them again; `paths` says where things are. docs/benchmarks/ has what each one measures.
"""
