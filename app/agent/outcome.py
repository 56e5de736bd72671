"""What the model reads for one tool call: ``ToolOutcome``, built from the call's result."""

from __future__ import annotations

from app.logger import redact_registered
from app.tool.base import ToolResult, format_output

_ERROR = "Error: "


class ToolOutcome(str):
    """One call as the model reads it: the text (an outcome *is* that text, as upstream's
    ``execute_tool`` returned a string), the image the call produced, whether it failed (known
    from the result, never guessed from the text) and how long it ran (seconds, if timed)."""

    image: str | None
    failed: bool
    seconds: float | None

    def __new__(
        cls,
        text: str,
        image: str | None = None,
        failed: bool = False,
        seconds: float | None = None,
    ) -> ToolOutcome:
        obj = super().__new__(cls, text)
        obj.image = image
        obj.failed = failed
        obj.seconds = seconds
        return obj

    @property
    def text(self) -> str:
        """The text as a plain ``str``."""
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"ToolOutcome({self.text!r}, failed={self.failed}, image={self.image is not None})"


def observe(name: str, result: ToolResult, failed: bool) -> ToolOutcome:
    """What the model reads for the ``result`` of a call of ``name`` (``failed``: whether it
    failed, as ``result_failed`` said): a failure once, as ``Error: <what went wrong>``;
    otherwise upstream's ``Observed output of cmd ...`` lines. No registered secret is kept."""
    image = result.base64_image or None
    if failed:
        return refused(redact_registered(result.error or format_output(result.output)), image)
    text = redact_registered(format_output(result.output))
    if not text:
        return ToolOutcome(f"Cmd `{name}` completed with no output", image)
    return ToolOutcome(f"Observed output of cmd `{name}` executed:\n{text}", image)


def refused(message: str, image: str | None = None) -> ToolOutcome:
    """A failed call as the model reads it: ``Error: <message>``, said once."""
    text = message.strip() or "the tool failed without saying why"
    return ToolOutcome(text if text.startswith(_ERROR) else _ERROR + text, image, failed=True)
