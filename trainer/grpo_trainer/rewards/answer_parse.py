r"""Short math answers (LaTeX or plain text) to a small expression tree.

Why our own parser rather than sympy's `parse_expr` / `parse_latex`: `parse_expr` evaluates Python
(model output is untrusted), `parse_latex` needs an ANTLR runtime that clashes with Hydra's, and
neither bounds its time. This one reads only the notation geometry answers use (numbers, `+ - * /
^`, `\frac`, `\sqrt`, `\pi`, implicit products such as `2\sqrt{3}`, a few functions, single-letter
variables), is linear in the input, refuses anything else, and yields trees that can be evaluated
with floats or rebuilt in sympy without `eval`.

A tree is nested tuples (hashable, so results can be cached, and JSON-able for the sympy worker):
`("num", "0.5")`, `("sym", "x")`, `("pi",)`, `("add"|"sub"|"mul"|"div"|"pow", a, b)`,
`("neg", a)`, `("sqrt", a)`, `("root", n, a)`, `("fn", name, a)`.
"""

from __future__ import annotations

import functools
import re
from typing import Any

Node = tuple[Any, ...]
"""A tagged tree (see above): what follows the tag depends on the tag, so its items stay untyped."""

MAX_ANSWER_CHARS = 256
MAX_DEPTH = 32
MAX_SYMBOLS = 3
FUNCTIONS = frozenset(
    {"sin", "cos", "tan", "cot", "sec", "csc", "arcsin", "arccos", "arctan", "ln", "log", "exp"}
)
GREEK = frozenset(
    {
        "alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta",
        "vartheta", "lambda", "mu", "nu", "xi", "rho", "sigma", "tau", "phi", "varphi", "chi",
        "psi", "omega",
    }
)  # fmt: skip

_UNICODE = str.maketrans(
    {"−": "-", "–": "-", "×": "*", "·": "*", "÷": "/", "√": "\\sqrt", "π": "\\pi ", "°": "", "，": ","}
)
_LEFT_RIGHT = re.compile(r"\\(?:left|right|big|Big|bigg|Bigg)(?![a-zA-Z])")
_SPACING = re.compile(r"\\[,;:! ]|\\q?quad(?![a-zA-Z])|~")
_DEGREES = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|\\circ(?![a-zA-Z])|\\degree(?![a-zA-Z])")
_WRAPPER = re.compile(
    r"\\(?:text|textbf|textrm|textit|mathrm|mathbf|mathit|mbox|operatorname|displaystyle)\s*\{([^{}]*)\}"
)
_STYLE = re.compile(r"\\(?:displaystyle|textstyle)(?![a-zA-Z])")
_APPROX = re.compile(r"\\approx(?![a-zA-Z])|≈")
_UNIT = re.compile(
    r"(?<=[\d})a-z\s])\s*(?:square|sq\.?|cubic)?\s*"
    r"(?:units?|cm|mm|km|m|in|inch(?:es)?|ft|feet|foot|yd|yards?|(?:centi|milli|kilo)?met(?:er|re)s?|"
    r"degrees?|deg|radians?|rad)"
    r"\s*(?:\^\s*\{?\s*[23]\s*\}?|²|³)?\s*\.?\s*$",
    re.IGNORECASE,
)
_THOUSANDS = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?", re.ASCII)
_NUMBER = re.compile(r"\d+(?:\.\d*)?|\.\d+", re.ASCII)
_WORD = re.compile(r"[a-zA-Z]+")
_COMMAND = re.compile(r"\\([a-zA-Z]+)")


class ParseError(ValueError):
    """The answer is not in the notation this module reads."""


@functools.lru_cache(maxsize=16384)
def normalize(answer: str) -> str | None:
    """Canonical text of an answer: wrappers, units, degree marks and spacing removed.

    Returns None for answers longer than MAX_ANSWER_CHARS: no geometry answer is that long, and
    refusing them keeps the cost of grading independent of what the model writes.
    """
    if len(answer) > MAX_ANSWER_CHARS:
        return None
    text = answer.translate(_UNICODE).strip()
    for token in ("\\$", "$", "\\(", "\\)", "\\[", "\\]"):
        text = text.replace(token, "")
    text = text.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("{,}", "")
    text = _LEFT_RIGHT.sub("", text)
    text = _SPACING.sub("", text)
    text = _DEGREES.sub("", text)
    text = _STYLE.sub("", text)
    previous = None
    while previous != text:
        previous, text = text, _WRAPPER.sub(r"\1", text)
    text = text.replace("\\%", "").replace("%", "")
    text = _APPROX.split(text, maxsplit=1)[0]
    if "=" in text:
        head, _, tail = text.rpartition("=")
        if tail.strip() and "<" not in head and ">" not in head:
            text = tail
    text = text.strip().rstrip(".").strip()
    unitless = _UNIT.sub("", text).strip()
    if unitless and unitless != text:
        text = unitless
    if _THOUSANDS.fullmatch(text):
        text = text.replace(",", "")
    return text


def squash(text: str) -> str:
    """Whitespace-free, lower-case form for the string-equality shortcut."""
    return "".join(text.split()).lower()


@functools.lru_cache(maxsize=16384)
def parse(text: str) -> tuple[Node, ...] | None:
    """Parse a normalized answer into one tree per comma-separated element; None if unreadable."""
    if not text or len(text) > MAX_ANSWER_CHARS:
        return None
    try:
        items = _Parser(text).parse()
    except (ParseError, RecursionError):
        return None
    symbols: set[str] = set()
    for item in items:
        symbols |= free_symbols(item)
    if len(symbols) > MAX_SYMBOLS:
        return None
    return items


def free_symbols(node: Node) -> frozenset[str]:
    """Names of the variables a tree mentions."""
    kind = node[0]
    if kind == "sym":
        return frozenset((node[1],))
    if kind in ("num", "pi"):
        return frozenset()
    children = node[2:] if kind == "fn" else node[1:]
    out: frozenset[str] = frozenset()
    for child in children:
        out |= free_symbols(child)
    return out


def _mixed_number(whole: Node, fraction: Node) -> Node | None:
    """`7\\frac{3}{4}` is 7 3/4 (as mathruler reads it), not 7 x 3/4."""

    def is_integer(node: Node) -> bool:
        if node[0] != "num":
            return False
        digits: str = node[1]
        return digits.isdigit()

    if fraction[0] != "div" or not (is_integer(fraction[1]) and is_integer(fraction[2])):
        return None
    if is_integer(whole):
        return ("add", whole, fraction)
    if whole[0] == "neg" and is_integer(whole[1]):
        return ("neg", ("add", whole[1], fraction))
    return None


def _is_letter(char: str) -> bool:
    return char.isascii() and char.isalpha()


class _Parser:
    """Recursive descent over characters (LaTeX arguments like `\\frac12` are character-level)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0

    def parse(self) -> tuple[Node, ...]:
        items = [self.expr()]
        while self.peek() == ",":
            self.pos += 1
            items.append(self.expr())
        if self.peek():
            raise ParseError(f"unexpected {self.peek()!r}")
        return tuple(items)

    def peek(self) -> str:
        text = self.text
        while self.pos < len(text) and text[self.pos].isspace():
            self.pos += 1
        return text[self.pos] if self.pos < len(text) else ""

    def command(self) -> str | None:
        """Name of the LaTeX command at the cursor, without consuming it."""
        if self.peek() != "\\":
            return None
        match = _COMMAND.match(self.text, self.pos)
        return match.group(1) if match else None

    def expr(self) -> Node:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ParseError("nested too deeply")
        node = self.term()
        while True:
            char = self.peek()
            if char == "+":
                self.pos += 1
                node = ("add", node, self.term())
            elif char == "-":
                self.pos += 1
                node = ("sub", node, self.term())
            else:
                self.depth -= 1
                return node

    def term(self) -> Node:
        node = self.unary()
        while True:
            char = self.peek()
            name = self.command()
            if char and char in "*/":
                self.pos += 1
                node = ("mul" if char == "*" else "div", node, self.unary())
            elif name in ("cdot", "times", "div"):
                self.pos += len(name) + 1
                node = ("div" if name == "div" else "mul", node, self.unary())
            elif self.starts_atom():
                is_frac = self.text.startswith("\\frac", self.pos)
                factor = self.power()
                mixed = _mixed_number(node, factor) if is_frac else None
                node = mixed or ("mul", node, factor)
            else:
                return node

    def unary(self) -> Node:
        char = self.peek()
        if char == "-":
            self.pos += 1
            return ("neg", self.unary())
        if char == "+":
            self.pos += 1
            return self.unary()
        return self.power()

    def power(self) -> Node:
        base = self.atom()
        if self.peek() == "^":
            self.pos += 1
            if self.peek() == "{":
                return ("pow", base, self.group("{", "}"))
            return ("pow", base, self.unary())
        return base

    def starts_atom(self) -> bool:
        char = self.peek()
        if not char:
            return False
        if (char.isdecimal() and char.isascii()) or char == "." or char in "({[" or _is_letter(char):
            return True
        name = self.command()
        return name is not None and name not in ("cdot", "times", "div")

    def group(self, opening: str, closing: str) -> Node:
        if self.peek() != opening:
            raise ParseError(f"expected {opening!r}")
        self.pos += 1
        node = self.expr()
        if self.peek() != closing:
            raise ParseError(f"expected {closing!r}")
        self.pos += 1
        return node

    def argument(self) -> Node:
        """A LaTeX macro argument: a braced group or a single character / command."""
        char = self.peek()
        if char == "{":
            return self.group("{", "}")
        if char.isascii() and char.isdecimal():
            self.pos += 1
            return ("num", char)
        if _is_letter(char):
            self.pos += 1
            return ("sym", char)
        if char == "\\":
            return self.atom()
        raise ParseError("missing argument")

    def atom(self) -> Node:
        char = self.peek()
        if not char:
            raise ParseError("unexpected end")
        if (char.isdecimal() and char.isascii()) or char == ".":
            match = _NUMBER.match(self.text, self.pos)
            if match is None:
                raise ParseError("bad number")
            self.pos = match.end()
            digits = match.group().rstrip(".")
            return ("num", "0" + digits if digits.startswith(".") else digits)
        if char in "({[":
            closing = {"(": ")", "{": "}", "[": "]"}[char]
            return self.group(char, closing)
        if char == "\\":
            return self.latex_command()
        if _is_letter(char):
            return self.word()
        raise ParseError(f"unexpected {char!r}")

    def latex_command(self) -> Node:
        name = self.command()
        if name is None:
            raise ParseError("stray backslash")
        self.pos += len(name) + 1
        if name == "frac":
            numerator = self.argument()
            return ("div", numerator, self.argument())
        if name == "sqrt":
            if self.peek() == "[":
                index = self.group("[", "]")
                return ("root", index, self.argument())
            return ("sqrt", self.argument())
        if name == "pi":
            return ("pi",)
        if name in FUNCTIONS:
            return self.function(name)
        if name in GREEK:
            return ("sym", name)
        raise ParseError(f"unsupported command \\{name}")

    def function(self, name: str) -> Node:
        """`\\sin x`, `\\sin(x)^2` (square of the sine) and `\\sin^2 x` (the same)."""
        exponent = None
        if self.peek() == "^":
            self.pos += 1
            exponent = self.group("{", "}") if self.peek() == "{" else self.atom()
        char = self.peek()
        argument = self.group(char, ")" if char == "(" else "}") if char and char in "({" else self.power()
        node: Node = ("fn", name, argument)
        return ("pow", node, exponent) if exponent is not None else node

    def word(self) -> Node:
        match = _WORD.match(self.text, self.pos)
        if match is None:
            raise ParseError("expected a word")
        word = match.group()
        self.pos = match.end()
        if word == "pi":
            return ("pi",)
        if word == "sqrt":
            return ("sqrt", self.power())
        if word in FUNCTIONS:
            return self.function(word)
        if len(word) > MAX_SYMBOLS:
            raise ParseError(f"word {word!r}")
        node: Node = ("sym", word[0])
        for letter in word[1:]:
            node = ("mul", node, ("sym", letter))
        return node
