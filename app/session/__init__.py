"""Durable sessions: every run's history in ``<workspace>/.sessions/<id>.jsonl``, written as
it goes, so a crash loses at most the step in flight, and a run can be resumed from it.

```python
from app.session import SessionStore

store = SessionStore.for_workspace(workspace)
recorder = store.start(agent, prompt_kind="agent")     # records every step of every run
await agent.run("task")
...
data = store.load(recorder.session_id)                  # later, or in another process
await data.restore_agent(agent)                         # memory, step count, usage
if data.incomplete:
    await agent.resume()                                # carry on the cut-off run
```
"""

from app.session.reader import AgentSnapshot, SessionData, read_session
from app.session.recorder import SessionRecorder
from app.session.store import SESSIONS_DIR, SessionInfo, SessionStore
from app.session.writer import SessionWriter

__all__ = [
    "SESSIONS_DIR",
    "AgentSnapshot",
    "SessionData",
    "SessionInfo",
    "SessionRecorder",
    "SessionStore",
    "SessionWriter",
    "read_session",
]
