"""Integrations with agent frameworks; each lives in its own module and needs its extra."""
