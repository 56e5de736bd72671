"""Prompts of the generic tool-calling agent (our own words)."""

SYSTEM_PROMPT = (
    "You are an agent that completes tasks by calling the tools you are given. "
    "Work step by step: decide what to do next, call a tool, read its result, and continue."
)

NEXT_STEP_PROMPT = (
    "Decide on the next action. Call a tool if one helps; when the task is done, "
    "call `terminate` (or answer directly if no tool is needed)."
)

STUCK_PROMPT = (
    "You have repeated the same response several times without progress. Try a different "
    "approach: a different tool, different arguments, or finish if the task cannot be done."
)

REQUIRED_TOOL_PROMPT = (
    "A tool call is required at this step, but your answer contained none. "
    "Respond by calling one of the available tools."
)

EMPTY_REPLY_PROMPT = (
    "Your last reply was empty: it had no text and no tool call. Reply with a tool call, or "
    "with your answer if the task is done."
)

CONTINUE_PROMPT = (
    "Your last reply was cut off at the length limit. Continue exactly where it stopped, "
    "without repeating what you already wrote."
)

NOT_RUN_ERROR = (
    "Error: this tool call was not run: your reply asked for {total} tool calls, and at most "
    "{cap} run per reply (max_tool_calls_per_reply). The first {cap} ran; call again, in a "
    "later reply, those of the others you still need."
)

CUT_ARGUMENTS_ERROR = (
    "Error: your reply was cut off at the length limit while writing the arguments of "
    "`{name}`, so they are incomplete ({problem}). The tool was not run. Call it again with "
    "shorter arguments (for example, write a long file in several parts)."
)
