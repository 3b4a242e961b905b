"""Games played in-process: bot players and the simulation that runs them through the rules.

Kept apart from :mod:`service.rules`, which is pure: bots draw their choices from their own random
generators, and the simulation drives whole games (and checks the rules' invariants as it goes). Both
only propose commands; the decider judges them like anyone else's.
"""
