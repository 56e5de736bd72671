"""One exception tree, in families by who can act: developer mistakes (raised), errors the
model can fix (``ToolError``, sent back to it), LLM failures (transient ones retried)."""

from __future__ import annotations

from dataclasses import dataclass


class OpenManusError(Exception):
    """Base of every error this framework raises on purpose."""

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


# --- developer / user mistakes -------------------------------------------------------------


class ConfigError(OpenManusError):
    """The configuration is missing, unreadable or invalid; the message says how to fix it."""


class AgentError(OpenManusError):
    """An agent was used in a way its contract does not allow."""


class AgentStateError(AgentError):
    """An agent was asked to run while it is already running (or in another illegal state)."""


class SessionError(OpenManusError):
    """A session file cannot be found or read (unknown id, not a session, unreadable)."""


class SessionBusyError(SessionError):
    """Another process is running this session (its file is locked; exit code 3), or, in the
    web UI, a task is already running in it (HTTP 409)."""


class SessionWriteError(SessionError):
    """A session record could not be written (disk full...); exit code 4."""


class SandboxError(OpenManusError):
    """The sandbox could not do what was asked (start, confine, clean up)."""


class SandboxUnavailableError(SandboxError):
    """The configured sandbox backend cannot run here (no ``bwrap``, no Docker engine)."""


class SandboxTimeoutError(SandboxError):
    """A sandboxed command ran past its time limit (upstream's name, raised by its client API)."""


class SandboxResourceError(SandboxError):
    """A sandbox limit was reached: too many sandboxes, no room for another (upstream's name)."""


class UnsupportedFeatureError(OpenManusError):
    """Upstream code needs a service or package this project does not provide (Daytona,
    Bedrock, crawl4ai...); the message names what is needed and the alternative."""


#: Why ``api_type = "aws"`` is refused (by the config at load, by ``app.bedrock``'s classes).
BEDROCK_MESSAGE = (
    "api_type 'aws' (Bedrock) is not supported yet: reach Bedrock through an OpenAI-compatible "
    'gateway (LiteLLM, bedrock-access-gateway) and set api_type = "openai" with that '
    "gateway's base_url, or use another provider"
)


class BatchBackendError(OpenManusError):
    """A batch backend could not start or reach its workers (e.g. Ray failed to start)."""


# --- errors the model can fix --------------------------------------------------------------


class ToolError(OpenManusError):
    """Raised by a tool; its message goes back to the model as a failed tool result."""


@dataclass(frozen=True, slots=True)
class ArgumentProblem:
    """One way a tool call's arguments do not fit the tool's schema: where (``steps[0]``,
    ``charts[1].chartType``) and what was expected against what came."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class ToolArgumentsError(ToolError):
    """A call's arguments do not fit the tool's schema (not run); every problem is listed."""

    def __init__(
        self, tool: str, problems: tuple[ArgumentProblem, ...], count: int | None = None
    ) -> None:
        self.tool = tool
        self.problems = problems
        self.count = len(problems) if count is None else count
        lines = [
            f"Invalid arguments for tool '{tool}' (it was not run); fix all of these "
            "and call it again:"
        ]
        lines.extend(f"- {problem}" for problem in problems)
        if self.count > len(problems):
            lines.append(f"- ... and {self.count - len(problems)} more problem(s) like these")
        super().__init__("\n".join(lines))


class MCPServerError(OpenManusError):
    """An MCP server could not be started, reached or talked to; the message names it."""


# --- LLM failures --------------------------------------------------------------------------


class LLMError(OpenManusError):
    """A request to the language model failed."""

    #: How many times the request was sent (more than 1 when retries gave up).
    attempts: int = 1

    def __init__(
        self, message: str = "", *, status_code: int | None = None, model: str | None = None
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.model = model


class LLMTransientError(LLMError):
    """A failure that may pass by itself; the LLM wrapper retries these with backoff."""


class LLMRateLimitError(LLMTransientError):
    """HTTP 429; ``retry_after`` holds the server's requested delay in seconds, if any."""

    def __init__(
        self,
        message: str = "",
        *,
        retry_after: float | None = None,
        status_code: int | None = None,
        model: str | None = None,
    ) -> None:
        super().__init__(message, status_code=status_code, model=model)
        self.retry_after = retry_after


class LLMTimeoutError(LLMTransientError):
    """The request did not complete within its timeout."""


class LLMConnectionError(LLMTransientError):
    """The endpoint could not be reached or dropped the connection."""


class LLMServerError(LLMTransientError):
    """HTTP 5xx (or 408/409) from the endpoint."""


class LLMEndpointError(LLMError):
    """``base_url`` leads nowhere useful (refused, unknown host, TLS, not an LLM API): not
    retried, since the same URL cannot help; the message names the endpoint."""


class LLMAuthenticationError(LLMError):
    """HTTP 401/403: the API key is missing, wrong or lacks permission."""


class LLMQuotaError(LLMError):
    """HTTP 429 with an exhausted quota: waiting will not help."""


class LLMBadRequestError(LLMError):
    """HTTP 400/422: the request itself was rejected; retrying the same request cannot help."""


class LLMNotFoundError(LLMBadRequestError):
    """HTTP 404: the model or the endpoint path does not exist (check ``model``/``base_url``)."""


class ContextWindowExceededError(LLMBadRequestError):
    """The request does not fit the model's context window (``max_input_tokens`` or the API)."""

    def __init__(
        self,
        message: str = "",
        *,
        tokens: int | None = None,
        limit: int | None = None,
        status_code: int | None = None,
        model: str | None = None,
    ) -> None:
        super().__init__(message, status_code=status_code, model=model)
        self.tokens = tokens
        self.limit = limit


#: Upstream's name for the same condition.
TokenLimitExceeded = ContextWindowExceededError


class ToolsNotSupportedError(LLMBadRequestError):
    """The model or endpoint rejects function calling (``tools`` in the request)."""


class ImagesNotSupportedError(LLMBadRequestError):
    """Images were sent to a model configured without image support."""


class LLMResponseError(LLMTransientError):
    """The answer is no usable chat completion (invalid JSON, a stream cut short...); retried
    a bounded number of times: a model that sampled garbage once may not do so again."""


class ReplayError(LLMError):
    """A replayed run asked something the recording cannot answer: it ran out of recorded
    responses, or (when replaying strictly) a request departed from the recorded one."""
