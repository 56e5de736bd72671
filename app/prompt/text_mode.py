"""Notes added to the tool prompt in text tool-calling mode (our words)."""

__all__ = ["TOOL_CHOICE_REQUIRED", "TOOL_CHOICE_SPECIFIC"]

#: ``tool_choice = "required"``: the answer must contain a call.
TOOL_CHOICE_REQUIRED = "This answer must call at least one tool."
#: ``tool_choice`` naming one function: ``{name}`` is filled in.
TOOL_CHOICE_SPECIFIC = "This answer must call the tool {name}."
