"""Values reach verl as themselves: rendered overrides parse back through Hydra to the same value."""

from __future__ import annotations

import pytest
from grpo_trainer.engines.verl.hydra_values import Override, render
from hydra.core.override_parser.overrides_parser import OverridesParser
from hypothesis import given
from hypothesis import strategies as st
from omegaconf import OmegaConf

PARSER = OverridesParser.create()


def read_back(rendered: str):
    value = PARSER.parse_override(f"k={rendered}").value()
    return OmegaConf.to_container(OmegaConf.create({"k": value}), resolve=True)["k"]


@given(st.text(max_size=60))
def test_any_string_survives(text):
    assert read_back(render(text)) == text


@pytest.mark.parametrize(
    "text",
    ["true", "null", "1e-6", "42", "a,b", "[1]", "${oc.env:HOME}", "it's", "end\\", "pkg://grpo.rewards", ""],
)
def test_strings_that_look_like_something_else_stay_strings(text):
    assert read_back(render(text)) == text


@given(
    st.one_of(
        st.booleans(),
        st.integers(min_value=-(2**40), max_value=2**40),
        st.floats(allow_nan=False, allow_infinity=False, width=64),
    )
)
def test_scalars_keep_type_and_value(value):
    got = read_back(render(value))
    assert type(got) is type(value)
    assert got == value


def test_lists_and_null():
    assert read_back(render(["console", "file"])) == ["console", "file"]
    assert read_back(render(["/a b/x.parquet", "/c.parquet"])) == ["/a b/x.parquet", "/c.parquet"]
    assert read_back(render(None)) is None


def test_non_finite_numbers_are_refused():
    with pytest.raises(ValueError, match="non-finite"):
        render(float("nan"))


def test_override_rendering():
    assert Override("a.b", 1).render() == "a.b=1"
    assert Override("a.b", "x y", add=True).render() == "+a.b='x y'"
