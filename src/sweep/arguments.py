"""A command's argument parser (compare, ui, spool, store, server, rescore; sweep's own flags, Hydra's parser, in
sweep.preflight.command): a bad argument is one line, `<command>: <what is wrong> (did you mean ...?) (see
<command> --help)`, exit 2, where argparse prints its usage block and a last line naming neither the option meant
(`--no-plots`) nor the choice (`imprt`)."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any, NoReturn

from sweep.config.suggest import closest


class Parser(argparse.ArgumentParser):
    def __init__(self, name: Any, **kwargs: Any) -> None:
        """`name`: what the command's lines begin with (`commands.prog`: the name the user typed); `prog`, as
        argparse's, the command as it is pasted (its --help's usage)."""
        super().__init__(**kwargs)
        self.name = name

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        """argparse's, an option given an empty value refused first: `--tracking-uri=` read the default store (the
        project's, not the one the user meant to name), `--out=` wrote into the current directory."""
        argv = list(sys.argv[1:] if args is None else args)
        valued = {o: a for a in self._actions if a.nargs is None for o in a.option_strings}
        for i, arg in enumerate(argv):
            if arg == "--":  # what follows is positional: an empty one is the command's to judge
                break
            name, eq, value = arg.partition("=")
            name = self._whole(name)  # `--tracking=`, argparse's abbreviation of --tracking-uri, was read as ''
            if name in valued and ((eq and not value) or (not eq and i + 1 < len(argv) and argv[i + 1] == "")):
                default = "" if valued[name].required else " (without the option: its default)"
                self.error(f"{name} is empty: expected a value{default}")
        return super().parse_known_args(args, namespace)

    def _whole(self, name: str) -> str:
        """The option `name` abbreviates, as argparse reads it (`allow_abbrev`): the one long option it begins."""
        if name in self._option_string_actions or not (self.allow_abbrev and name.startswith("--")):
            return name
        hits = [o for o in self._option_string_actions if o.startswith(name)]
        return hits[0] if len(hits) == 1 else name

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.name}: {message}{meant(self, message)} (see {self.prog} --help)\n")


def summary(doc: str | None) -> str:
    """A command module's docstring as its --help's description: the first sentence of its first paragraph, lines
    joined (the first line alone cut `sweep-rescore`'s at "a tracker's figures for"), without a leading
    "`command ...`: " (the usage line above it shows the command as pasted: `.venv/bin/sweep-compare`, where the
    docstring says `python -m sweep.compare`)."""
    text = re.sub(r"^`[^`]*`: ", "", " ".join((doc or "").split("\n\n", 1)[0].split()))
    return re.split(r"(?<=\.)\s+(?=[A-Z`])", text, maxsplit=1)[0]


def meant(parser: argparse.ArgumentParser, message: str) -> str:
    """' (did you mean ...?)' for argparse's error `message` of `parser`: the closest option to each unknown one,
    the closest choice to a bad one; '' when nothing is close."""
    guess: list[str] = []
    if unknown := re.match(r"unrecognized arguments: (.*)", message):
        options = [o for a in parser._actions for o in a.option_strings]
        words = [w.split("=", 1)[0] for w in unknown.group(1).split() if w.startswith("-")]
        same = {o.lower(): o for o in options}  # -M for -m: difflib finds a one-letter flag as close to any other
        guess = [near for w in words for near in ([same[w.lower()]] if w.lower() in same else closest(w, options, 1))]
    elif choice := re.search(r"invalid choice: '(.*)' \(choose from (.*)\)", message):
        guess = closest(choice.group(1), re.findall(r"'([^']*)'", choice.group(2)), 1)
    return f" (did you mean {' or '.join(guess)}?)" if guess else ""
