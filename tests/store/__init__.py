"""Event store tests, against a real PostgreSQL (see ``tests/conftest.py``)."""
