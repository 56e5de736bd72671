"""Prompts for calling tools in plain text, for models without function calling (our words).

Small local models read this with 2k-8k token windows, so every sentence has to earn its place.
"""

TOOL_PROMPT_INTRO = (
    "# Tools\n"
    "You can use the tools below. To use a tool, write a block like this, with the "
    "arguments as one JSON object:\n"
    '<tool_call>{"name": "<tool name>", "arguments": {"<argument>": "<value>"}}</tool_call>\n'
    "Use one block per call; several blocks in one answer are allowed. After your blocks, "
    "stop and wait: each result comes back to you in a <tool_response> block. "
    "An answer without a tool call block is your final answer."
)
# The call tag appears once only, in the example: a small model echoing a sentence that named
# it wrote a nameless "call" holding the rest of its answer (issue 29). The example's name is a
# placeholder no tool has: a model that copies it (Gemma 3 270M did) calls no tool, and the
# copy is answered as a call of no tool, never run (issue 38).

#: Names of the example call (this one, and the one before it): a call of them is a copy.
EXAMPLE_NAMES = frozenset({"<tool name>", "tool_name"})

#: Introduces the list of tools; each tool follows as ``- name: description`` with its
#: arguments indented below it (``* required`` marks the ones that must be given).
TOOL_LIST_HEADER = "Available tools (arguments marked * are required):"

#: How a tool's result is shown to the model: ``{name}`` and ``{call_id}`` are filled in.
TOOL_RESULT_OPEN = '<tool_response name="{name}" id="{call_id}">'
TOOL_RESULT_CLOSE = "</tool_response>"

#: ``tool_choice = "required"``: the answer must contain a call.
TOOL_CHOICE_REQUIRED = "This answer must call at least one tool."
#: ``tool_choice`` naming one function: ``{name}`` is filled in.
TOOL_CHOICE_SPECIFIC = "This answer must call the tool {name}."
