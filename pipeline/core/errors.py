"""Errors that reach the user, and the exit codes used everywhere.

Exit codes: 0 ok, 1 a check failed / drift found / image blocked, 2 bad input or
configuration. Every ``UserError`` is printed as one paragraph naming the file, line or
resource and what to do, then the process exits 2.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


class UserError(Exception):
    """Bad input or configuration: exit 2 with a one-paragraph message."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None):
        self.message = message
        self.where = where
        self.hint = hint
        super().__init__(self.render())

    def render(self) -> str:
        parts = []
        if self.where:
            parts.append(f"{self.where}:")
        parts.append(self.message.rstrip("."))
        text = " ".join(parts) + "."
        if self.hint:
            text += f" {self.hint.rstrip('.')}."
        return text


class StackError(UserError):
    """A stack file is malformed or violates the schema."""

    def __init__(self, problems: list[str], *, path: str):
        self.problems = problems
        self.path = path
        lines = "; ".join(problems)
        super().__init__(lines, where=None, hint="Fix the stack file and run `imagectl lint` again")


class CloudError(UserError):
    """A cloud API refused a call in a way the user must act on."""


class MissingDependency(UserError):
    """An optional extra is needed for this command."""

    def __init__(self, module: str, extra: str):
        super().__init__(
            f"this command needs the Python module '{module}', which is not installed",
            hint=f"Install it with: pip install 'imagectl[{extra}]'",
        )
