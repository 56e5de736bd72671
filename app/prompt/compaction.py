"""Prompts for condensing an agent's older conversation into a summary (our own wording)."""

SUMMARY_SYSTEM = (
    "You condense the working notes of an AI agent so it can keep going with less context. "
    "Be factual and specific; never invent anything."
)

SUMMARY_REQUEST = (
    "Below is the earlier part of an agent's work on a task. Write a compact summary the "
    "agent can rely on instead of it. Keep: what has been done and its results, files created "
    "or changed (with paths), commands that worked or failed, facts and numbers found, "
    "decisions made and open problems. Leave out chit-chat and repeated output. Use short "
    "bullet points.\n\n"
    "The task: {task}\n\n"
    "Earlier work:\n{history}"
)

SUMMARY_INTRO = (
    "[Earlier steps were condensed to fit the context window. Summary of the work so far:]\n"
)

TRUNCATED_NOTE = (
    "[{count} earlier messages were removed to fit the context window; no summary could be made.]"
)
