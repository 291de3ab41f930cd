"""A stand-in for `python -m verl.model_merger merge --backend fsdp --local_dir A --target_dir B`."""

import argparse
import json
import sys
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("operation")
parser.add_argument("--backend", required=True)
parser.add_argument("--local_dir", required=True)
parser.add_argument("--target_dir", required=True)
args = parser.parse_args()
assert args.operation == "merge"
assert args.backend == "fsdp"
assert Path(args.local_dir, "fsdp_config.json").is_file()
target = Path(args.target_dir)
target.mkdir(parents=True, exist_ok=True)
(target / "config.json").write_text(json.dumps({"model_type": "qwen3_vl", "from": args.local_dir}))
(target / "model.safetensors").write_bytes(b"weights")
sys.exit(0)
