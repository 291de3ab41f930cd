"""What a read through the reader pod gives back when the file is being written."""

from __future__ import annotations

from grpo_kubectl.volume import without_a_cut_character


def test_a_character_cut_at_the_end_of_a_read_is_dropped() -> None:
    # A log read while its writer is inside a progress bar's block (3 bytes in UTF-8): the bytes
    # so far decode to U+FFFD, which the file never holds.
    written = "step 1\n 42%|\u2588\u2588".encode()
    cut = written[:-1].decode("utf-8", errors="replace").split("\n")
    assert cut[-1].endswith("\ufffd")
    assert list(without_a_cut_character(iter(cut))) == ["step 1", " 42%|\u2588"]
    # Only the very end: the same character earlier in the read stays, and a whole read is unchanged.
    whole = ["a \ufffd b", "done"]
    assert list(without_a_cut_character(iter(whole))) == whole
    assert list(without_a_cut_character(iter(["\ufffd x", "y\ufffd"]))) == ["\ufffd x", "y"]
    assert list(without_a_cut_character(iter([]))) == []
