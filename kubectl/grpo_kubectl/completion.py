"""Shell completion for `kubectl grpo`, read off the plugin's own argparse tree.

kubectl (1.26 and later) completes a plugin's arguments by running `kubectl_complete-<plugin>`
from PATH with the words typed after the plugin's name, the last one the word being completed,
and reads cobra's `__complete` answer: one candidate per line (a tab, then its description), and
a last line `:<directive>` (4: offer no file names). `kubectl_complete-grpo` (a console script of
this distribution, beside `kubectl-grpo`) answers that way, and the scripts of `kubectl grpo
completion bash|zsh` ask it the same question for `kubectl-grpo` typed on its own. Job names are
not offered: that would be a request to the API server on every tab.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

SHELLS = ("bash", "zsh")
DEFAULT = 0
NO_FILES = 4
"""cobra's ShellCompDirective values."""

BASH = """\
# bash completion for kubectl-grpo; `kubectl grpo` completes through kubectl_complete-grpo.
#   source <(kubectl grpo completion bash)
_kubectl_grpo() {
    local out directive line
    out=$(kubectl_complete-grpo "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null) || return
    directive=${out##*:}
    out=${out%:*}
    COMPREPLY=()
    while IFS= read -r line; do
        [[ -n $line ]] && COMPREPLY+=("${line%%$'\\t'*}")
    done <<<"$out"
    if (( ${#COMPREPLY[@]} == 0 && (directive & 4) == 0 )); then
        mapfile -t COMPREPLY < <(compgen -f -- "${COMP_WORDS[COMP_CWORD]}")
    fi
}
complete -F _kubectl_grpo kubectl-grpo
"""

ZSH = """\
#compdef kubectl-grpo
# zsh completion for kubectl-grpo; `kubectl grpo` completes through kubectl_complete-grpo.
#   source <(kubectl grpo completion zsh)
_kubectl_grpo() {
  local -a lines found
  local directive
  lines=("${(@f)$(kubectl_complete-grpo "${(@)words[2,CURRENT]}" 2>/dev/null)}")
  directive=${lines[-1]#:}
  found=("${(@)lines[1,-2]}")
  if (( ${#found} )); then
    compadd -- "${(@)found%%$'\\t'*}"
  elif (( (directive & 4) == 0 )); then
    _files
  fi
}
compdef _kubectl_grpo kubectl-grpo
"""


def script(shell: str) -> str:
    return {"bash": BASH, "zsh": ZSH}[shell]


def commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps its tree here and nowhere public
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _option(parser: argparse.ArgumentParser, flag: str) -> argparse.Action | None:
    return parser._option_string_actions.get(flag)


def _takes_value(action: argparse.Action | None) -> bool:
    return action is not None and action.nargs != 0


def _described(parser: argparse.ArgumentParser, prefix: str) -> list[str]:
    """The options of `parser` starting with `prefix`, each with its help."""
    found = []
    for action in parser._actions:
        for flag in action.option_strings:
            if flag.startswith(prefix) and action.help != argparse.SUPPRESS:
                found.append(f"{flag}\t{(action.help or '').split(' (')[0]}")
    return found


def candidates(parser: argparse.ArgumentParser, words: list[str]) -> tuple[list[str], int]:
    """What may come at the last of `words` (the words after `kubectl grpo`), and the directive."""
    *done, current = words or [""]
    named = commands(parser)
    here, expects = parser, None
    for word in done:
        if expects is not None:
            expects = None
        elif word.startswith("-"):
            action = _option(here, word.split("=", 1)[0])
            expects = action if _takes_value(action) and "=" not in word else None
        elif here is parser and word in named:
            here = named[word]
    if expects is not None:  # the value of an option: its choices, else a file name
        if expects.choices:
            return [str(c) for c in expects.choices if str(c).startswith(current)], NO_FILES
        return [], DEFAULT
    if current.startswith("-"):
        return _described(here, current), NO_FILES
    if here is parser:
        return [
            f"{name}\t{cmd.description or ''}" for name, cmd in named.items() if name.startswith(current)
        ], NO_FILES
    choices = [a for a in here._positionals._group_actions if a.choices]
    if choices:
        return [str(c) for a in choices for c in (a.choices or ()) if str(c).startswith(current)], NO_FILES
    return [], NO_FILES


def main(argv: list[str] | None, parser: Callable[[], argparse.ArgumentParser]) -> int:
    """`kubectl_complete-grpo WORD...`: cobra's answer for the last word."""
    found, directive = candidates(parser(), list(sys.argv[1:] if argv is None else argv))
    for line in found:
        print(line)
    print(f":{directive}")
    return 0
