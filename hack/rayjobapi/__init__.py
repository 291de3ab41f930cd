"""The fake Ray job API of the test cluster: ``python -m rayjobapi`` from hack/ (server.py says what it serves).

Importing the package loads nothing beyond the standard library: the real backend (real.py,
podview.py, credentials.py) needs lightkube and is imported only when ``--ray-dashboard`` asks for it.
"""
