"""`grpo-operator` console script."""

from __future__ import annotations

import argparse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grpo-operator", description="Run the GRPOJob operator.")
    parser.parse_args(argv)
    parser.print_help()
    return 0
