"""Given/when/then scenarios for every rule id of the digest (``docs/RULES.md``)."""
