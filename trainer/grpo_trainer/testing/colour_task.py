"""A visual task whose answer only the image holds: name the colour of a rendered square.

The question text is the same for every row and the colours are balanced, so a model that does
not look at the image cannot beat 1/len(colours) in expectation. The square's size and place vary
and the background is noisy, so the vision tower has something to learn, not a lookup of one
fixed pixel.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from grpo_trainer.engines.trl.rewards import completion_text

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "green": (40, 180, 60),
    "blue": (40, 80, 220),
    "yellow": (230, 210, 40),
}
QUESTION = "what colour is the square ?"
# Maps random bytes onto mid-grey levels 100..155 (one table lookup per pixel, no Python loop).
_NOISE_LEVELS = bytes(100 + value % 56 for value in range(256))
# A wrong colour name earns a little: it shapes a random model towards answering with a colour
# at all (as the single-GPU LoRA recipe's format reward does), while the blind optimum stays far below the maximum.
WRONG_COLOUR_REWARD = 0.0
WORDS: tuple[str, ...] = ("colour", "square", *COLOURS)


def render_square(colour: str, rng: random.Random, side: int = 32) -> Any:
    """A grey, noisy canvas with one filled square of `colour`."""
    from PIL import Image, ImageDraw

    noise = rng.randbytes(side * side).translate(_NOISE_LEVELS)
    image = Image.merge("RGB", [Image.frombytes("L", (side, side), noise)] * 3)
    size = rng.randrange(side * 5 // 8, side * 7 // 8 + 1)
    left = rng.randrange(0, side - size + 1)
    top = rng.randrange(0, side - size + 1)
    ImageDraw.Draw(image).rectangle([left, top, left + size - 1, top + size - 1], fill=COLOURS[colour])
    return image


def make_rows(count: int, *, seed: int = 0, side: int = 32) -> list[dict[str, Any]]:
    """`count` rows, colours in equal shares, in TRL's format (prompt, image, answer)."""
    rng = random.Random(seed)
    names = list(COLOURS)
    rows = []
    for index in range(count):
        colour = names[index % len(names)]
        rows.append(
            {
                "prompt": [{"role": "user", "content": QUESTION}],
                "image": render_square(colour, rng, side),
                "answer": colour,
            }
        )
    rng.shuffle(rows)
    return rows


def colour_reward(
    prompts: Sequence[Any], completions: Sequence[Any], answer: Sequence[str], **kwargs: Any
) -> list[float]:
    """1 for the square's colour, WRONG_COLOUR_REWARD for another colour, else 0 (maximum: 1)."""
    scores = []
    for completion, truth in zip(completions, answer, strict=True):
        words = completion_text(completion).split()
        first = words[0] if words else ""
        scores.append(1.0 if first == truth else WRONG_COLOUR_REWARD if first in COLOURS else 0.0)
    return scores


def blind_optimum() -> float:
    """The best expected reward without seeing the image: always naming one colour."""
    share = 1.0 / len(COLOURS)
    return share + (1.0 - share) * WRONG_COLOUR_REWARD
