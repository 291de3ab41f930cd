"""geo3k -> verl parquet on a generated geo3k-shaped dataset, the content cache, user parquet checks."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from grpo_trainer import sources
from grpo_trainer.cli import main
from grpo_trainer.data import known_train_rows, planned, prepare
from grpo_trainer.data.geo3k import DATA_SOURCE, INSTRUCTION
from grpo_trainer.failures import CONFIG_ERROR, DATA_ERROR, ConfigError, DataError
from PIL import Image
from support.trainer_inputs import example_job, hf_cached_dataset, write_geo3k_dataset


@pytest.fixture
def geo3k_job(tmp_path):
    return example_job("geo3k-ascend-910b", tmp_path)


def test_geo3k_rows_columns_and_images_round_trip(geo3k_job):
    source = hf_cached_dataset(Path(geo3k_job.paths.cache_dir), rows={"train": 9, "validation": 2, "test": 4})
    prepared = prepare(geo3k_job, progress=False)

    assert prepared.built
    assert prepared.train_rows == 9
    train = pq.read_table(prepared.train_files[0])
    test = pq.read_table(prepared.val_files[0])
    assert train.num_rows == 9
    assert test.num_rows == 4
    assert train.column_names == ["data_source", "prompt", "images", "ability", "reward_model", "extra_info"]
    rows = train.to_pylist()
    for index, (row, original) in enumerate(zip(rows, source["train"], strict=True)):
        assert row["data_source"] == DATA_SOURCE
        assert row["prompt"] == [{"role": "user", "content": f"{original['problem']} {INSTRUCTION}"}]
        assert row["prompt"][0]["content"].startswith("<image>")
        assert row["ability"] == "math"
        assert row["reward_model"] == {"style": "rule", "ground_truth": original["answer"]}
        assert row["extra_info"] == {
            "split": "train",
            "index": index,
            "answer": original["answer"],
            "question": original["problem"],
        }
        # The images are the original PNG bytes, and still decode.
        assert row["images"] == original["images"]
        image = Image.open(io.BytesIO(row["images"][0]["bytes"]))
        assert image.format == "PNG"
        assert image.size == (48, 32)
    assert {r["extra_info"]["split"] for r in test.to_pylist()} == {"test"}
    assert "\\boxed{}" in INSTRUCTION
    assert "<think> </think>" in INSTRUCTION


def test_a_restarted_attempt_reuses_the_converted_data(geo3k_job):
    hf_cached_dataset(Path(geo3k_job.paths.cache_dir))
    first = prepare(geo3k_job, progress=False)
    stamp = os.stat(first.train_files[0]).st_mtime_ns
    second = prepare(geo3k_job, progress=False)
    assert not second.built
    assert second.train_files == first.train_files
    assert os.stat(second.train_files[0]).st_mtime_ns == stamp
    # No temporary folders are left behind next to the dataset.
    assert [p.name for p in Path(geo3k_job.paths.data_dir).iterdir()] == [
        Path(first.train_files[0]).parent.name
    ]
    assert known_train_rows(geo3k_job) == first.train_rows


def test_changed_content_gets_a_new_cache_entry(geo3k_job):
    hf_cached_dataset(Path(geo3k_job.paths.cache_dir))
    first = prepare(geo3k_job, progress=False)
    hf_cached_dataset(Path(geo3k_job.paths.cache_dir), rows={"train": 5, "validation": 1, "test": 2})
    second = prepare(geo3k_job, progress=False)
    assert second.built
    assert second.train_rows == 5
    assert Path(second.train_files[0]).parent != Path(first.train_files[0]).parent


def test_geo3k_from_a_volume(tmp_path):
    write_geo3k_dataset(tmp_path / "raw")
    job = example_job("geo3k-ascend-910b", tmp_path, dataset={"source": str(tmp_path / "raw")})
    assert prepare(job, progress=False).train_rows == 7


def test_a_hub_dataset_missing_from_the_cache_is_a_clear_error(geo3k_job):
    with pytest.raises(DataError, match=r"hf://hiyouga/geometry3k is not in the cache at .*huggingface/hub"):
        prepare(geo3k_job, progress=False)


def test_a_geo3k_source_without_splits(tmp_path):
    (tmp_path / "raw" / "data").mkdir(parents=True)
    job = example_job("geo3k-ascend-910b", tmp_path, dataset={"source": str(tmp_path / "raw")})
    with pytest.raises(DataError, match="no train or test split"):
        prepare(job, progress=False)


def test_a_geo3k_file_missing_a_column(tmp_path):
    raw = tmp_path / "raw" / "data"
    raw.mkdir(parents=True)
    for split in ("train", "test"):
        pq.write_table(
            pa.table({"problem": ["<image>x"], "answer": ["1"]}), raw / f"{split}-00000-of-00001.parquet"
        )
    job = example_job("geo3k-ascend-910b", tmp_path, dataset={"source": str(tmp_path / "raw")})
    with pytest.raises(DataError, match=r"lacks column.* images"):
        prepare(job, progress=False)


def write_user_parquet(path: Path, columns: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)
    return path


def user_rows(n: int) -> dict:
    return {
        "data_source": ["safety"] * n,
        "prompt": [[{"role": "user", "content": "<image>Is this safe?"}]] * n,
        "images": [[{"bytes": b"png", "path": None}]] * n,
        "reward_model": [{"ground_truth": "refuse"}] * n,
    }


def test_user_parquet_is_used_where_it_is(tmp_path):
    train = write_user_parquet(tmp_path / "d" / "train.parquet", user_rows(6))
    val = write_user_parquet(tmp_path / "d" / "val" / "part-0.parquet", user_rows(2))
    job = example_job(
        "safegrpo-nvidia",
        tmp_path,
        dataset={"train": [str(train)], "validation": [str(tmp_path / "d" / "val")]},
    )
    prepared = prepare(job, progress=False)
    assert prepared.train_files == [str(train)]
    assert prepared.val_files == [str(val)]
    assert prepared.train_rows == 6
    assert not prepared.built
    assert not any(Path(job.paths.data_dir).glob("*"))


def test_user_parquet_missing_columns_names_them(tmp_path):
    columns = user_rows(2)
    del columns["reward_model"]
    train = write_user_parquet(tmp_path / "train.parquet", columns)
    job = example_job("safegrpo-nvidia", tmp_path, dataset={"train": [str(train)], "validation": None})
    with pytest.raises(DataError, match=r"lacks column\(s\) reward_model that verl needs"):
        prepare(job, progress=False)


def test_user_parquet_without_images_is_a_warning(tmp_path):
    columns = user_rows(2)
    del columns["images"]
    train = write_user_parquet(tmp_path / "train.parquet", columns)
    job = example_job("safegrpo-nvidia", tmp_path, dataset={"train": [str(train)], "validation": None})
    assert any("text only" in w for w in prepare(job, progress=False).warnings)


def test_a_missing_claim_path_says_so(tmp_path):
    job = example_job("safegrpo-nvidia", tmp_path)
    with pytest.raises(DataError, match="is the claim 'safegrpo-data' bound and mounted"):
        prepare(job, progress=False)


def test_s3_is_refused_with_a_way_out(tmp_path):
    with pytest.raises(ConfigError, match="pvc://"):
        sources.resolve("s3://bucket/data", "dataset", tmp_path)


def test_planned_paths_need_no_data(geo3k_job):
    plan = planned(geo3k_job)
    assert plan.train_files == [f"{geo3k_job.paths.data_dir}/geo3k-<content-hash>/train.parquet"]


def test_prepare_data_command(tmp_path, capsys, geo3k_job):
    hf_cached_dataset(Path(geo3k_job.paths.cache_dir))
    spec = tmp_path / "job.json"
    spec.write_text(geo3k_job.model_dump_json(by_alias=True))
    assert main(["prepare-data", "--spec", str(spec), "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["trainRows"] == 7
    assert out["built"] is True


def test_prepare_data_command_failure_exit_code(tmp_path, capsys, geo3k_job):
    spec = tmp_path / "job.json"
    spec.write_text(geo3k_job.model_dump_json(by_alias=True))
    assert main(["prepare-data", "--spec", str(spec)]) == DATA_ERROR
    assert "GRPO_FAILURE" in capsys.readouterr().err
    assert main(["prepare-data", "--spec", str(tmp_path / "missing.json")]) == CONFIG_ERROR
