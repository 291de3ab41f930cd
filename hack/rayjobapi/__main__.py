"""``python -m rayjobapi [--listen HOST:PORT] ...``: start the fake Ray job API (server.py)."""

from .server import main

main()
