"""``python -m app.web``: serve the web UI."""

from app.web.cli import main

raise SystemExit(main())
