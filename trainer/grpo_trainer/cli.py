"""`grpo-train` console script."""

from __future__ import annotations

import argparse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grpo-train", description="Run a GRPOJob's training engine.")
    parser.parse_args(argv)
    parser.print_help()
    return 0
