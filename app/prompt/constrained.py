"""Prompts for constrained tool calling, where the server makes every answer one JSON call of
an offered tool (our words). The constraint settles the format; these words help a small model
choose the tool and fill the arguments (measured: docs/local-models.md).
"""

CONSTRAINED_INTRO = (
    "# Tools\n"
    "Each answer of yours is one tool call, written as a JSON object with the tool's name and "
    "its arguments. The result comes back to you in a <tool_response> block. When the task "
    "is done, call terminate."
)

#: Introduces the tools; each follows as ``- name: description``, its arguments indented below
#: (``*`` marks the required ones), then one example call.
CONSTRAINED_LIST_HEADER = "Available tools (arguments marked * are required):"

#: The example line under each tool: ``{call}`` is a JSON call.
EXAMPLE_LINE = "  Example: {call}"

#: Example arguments for the framework's own tools (a tool not listed gets arguments made from
#: its schema). Free text is a placeholder in angle brackets: a small model copies example
#: values it can copy (measured: "notes.txt" for every file), and a copied placeholder is
#: caught, never run.
EXAMPLES: dict[str, dict[str, object]] = {
    "str_replace_editor": {"command": "create", "path": "<file name>", "file_text": "<its text>"},
    "python_execute": {"code": "<python code>"},
    "bash": {"command": "<shell command>"},
    "ask_human": {"inquire": "<question>"},
    "browser_use": {"action": "go_to_url", "url": "<url>"},
    "terminate": {"status": "success"},
}

#: Said when an answer sent an example's placeholder as a value (the turn is asked again,
#: without the examples).
PLACEHOLDER_COPIED = (
    "Your call copied placeholder values from an example. Call the tool again with the real "
    "values, taken from the task."
)

#: Two steps (``constrained_steps = 2``): the system prompt of both requests; each tool
#: follows as ``- name: first sentence``.
CHOICE_INTRO = (
    "# Tools\n"
    "Each step of yours calls one tool: first you name the tool, then you give its arguments, "
    "both as JSON. A tool's result comes back to you in a <tool_response> block. When the "
    "task is done, call terminate.\n\n"
    "Tools:"
)
#: The end of the first request: ``{request}`` is the user's.
CHOICE_NOTE = (
    'The task: {request}\nWhich tool does the next step need? Answer {{"name": <the tool>}}.'
)
#: The end of the second request: ``{tool}`` is ``name: first sentence``, ``{arguments}``
#: its arguments, one a line.
ARGUMENTS_NOTE = (
    "The next step calls {tool}\n"
    "Its arguments (* marks the required ones):\n"
    "{arguments}\n"
    "The task: {request}\n"
    "Answer with the arguments of {name} as one JSON object, the values taken from the task "
    "and the results so far."
)
