"""grpo-operator: runs GRPO post-training of vision-language models on KubeRay."""

__version__ = "0.1.0"
