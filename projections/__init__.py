"""Read models rebuilt from the event log."""
