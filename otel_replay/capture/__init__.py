"""Capture: the instrumentor that turns every httpx/httpx2 call into a step span."""
