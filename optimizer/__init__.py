"""The skill optimizer: improves an Agent Skill overnight by proposing, running, grading and
comparing variants, and promoting only statistically sound winners."""

__version__ = "0.1.0"
