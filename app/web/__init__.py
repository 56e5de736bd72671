"""The web UI: watch and steer the agent's computer from a browser (``python -m app.web``;
the program is :func:`app.web.cli.main`, the ASGI app :func:`app.web.server.create_app`).

Starlette and uvicorn are in the ``web`` extra (``pip install -e '.[web]'``); nothing here
is imported by the terminal programs.
"""
