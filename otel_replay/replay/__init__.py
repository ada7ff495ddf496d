"""Replay: rebuild runs from span data and serve them back through a replay transport."""
