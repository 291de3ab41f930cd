"""Stand-ins that go ahead of real packages on verl's PYTHONPATH only (see ../trl_shadow.py)."""
