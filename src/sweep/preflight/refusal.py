"""`Refusal`: what a preflight check raises, the one line it prints and the exit code it ends the command with."""

from __future__ import annotations

import sys
from typing import NoReturn

BAD_INPUT = 2  # the command's input cannot run (a value, a name, a key): nothing was started
CONFIG_ERROR = "config error: "  # a config check's line starts so (sweep-rescore says its own lines after it)
UNUSABLE = 1  # what the command needs is not there (a store that cannot be written, a server that does not answer)


class Refusal(Exception):
    """A command refused before any job: `line` is said as `sweep: <line>` on stderr, then exit `code`."""

    def __init__(self, line: str, code: int = BAD_INPUT) -> None:
        super().__init__(line)
        self.line = line
        self.code = code

    def exit(self) -> NoReturn:
        print(f"sweep: {self.line}", file=sys.stderr, flush=True)
        raise SystemExit(self.code)

    @classmethod
    def config_error(cls, message: str) -> "Refusal":
        """Bad input found by a config check (sweep.errors.ConfigError): `config error: <message>`, exit 2."""
        return cls(f"{CONFIG_ERROR}{message}")
